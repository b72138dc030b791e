// Chunks per day per source as a stacked bar chart in inline SVG (no library).

const SVG = "http://www.w3.org/2000/svg";
const LEGEND_CHARS = 30;
const COLOURS = ["#2f6fb0", "#d9822b", "#3a9b5c", "#b5485d", "#7a5cb0", "#8c8c2b", "#4a4a4a"];

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

// One series per source, and st-qdrant-memory's points (no source) last. A source is any
// string a client sends: it is read as an own key only ("constructor" is not Object's), and
// one spelled like stSourceName stays its own series.
function seriesOf(days, stSourceName) {
  const sources = [...new Set(days.flatMap((d) => Object.keys(d.by_source)))].sort();
  const series = sources.map((name) => ({ name, count: (d) => (Object.hasOwn(d.by_source, name) ? d.by_source[name] : 0) }));
  if (days.some((d) => d.without_source)) series.push({ name: stSourceName, count: (d) => d.without_source || 0 });
  return series;
}

// days: [{date, by_source: {name: n}, without_source: n}]; stSourceName labels the last.
export function dayChart(days, stSourceName) {
  const series = seriesOf(days, stSourceName);
  const names = series.map((s) => s.name);
  const counts = (d) => series.map((s) => s.count(d));
  const top = Math.max(1, ...days.map((d) => counts(d).reduce((a, b) => a + b, 0)));
  const width = 600, height = 180, left = 34, right = 22, bottom = 20, bar = (width - left - right) / days.length;
  const root = svg("svg", { viewBox: `0 0 ${width} ${height + 40}`, role: "img", class: "chart" });
  root.append(svg("title", {}, "Chunks per day per source"));
  root.append(svg("text", { x: 0, y: 10, class: "axis" }, String(top)));
  root.append(svg("text", { x: 0, y: height - bottom, class: "axis" }, "0"));
  days.forEach((day, i) => {
    let y = height - bottom;
    counts(day).forEach((n, s) => {
      if (!n) return;
      const h = ((height - bottom - 12) * n) / top;
      y -= h;
      const rect = svg("rect", { x: left + i * bar + 1, y, width: Math.max(1, bar - 2), height: h, fill: COLOURS[s % COLOURS.length] });
      rect.append(svg("title", {}, `${day.date} ${names[s]}: ${n}`));
      root.append(rect);
    });
    if ((days.length - 1 - i) % 7 === 0) {  // today, and every week back from it
      root.append(svg("text", { x: left + (i + 0.5) * bar, y: height - 4, class: "axis", "text-anchor": "middle" }, day.date.slice(5)));
    }
  });
  names.forEach((n, s) => {
    const x = left + (s % 3) * 190, y = height + 12 + Math.floor(s / 3) * 14;
    // three legend columns of 190 units: a longer name is cut (whole in its tooltip), not
    // drawn over its neighbour's
    const item = svg("g", { class: "legend-item" });
    item.append(svg("title", {}, n));
    item.append(svg("rect", { x, y: y - 9, width: 10, height: 10, fill: COLOURS[s % COLOURS.length] }));
    item.append(svg("text", { x: x + 14, y, class: "legend" }, n.length > LEGEND_CHARS ? n.slice(0, LEGEND_CHARS - 1) + "…" : n));
    root.append(item);
  });
  return root;
}
