# One image for every memory-pool service (api, worker, scheduler); compose picks the command.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY api ./api
COPY workers ./workers
COPY shared ./shared
COPY memory_pool ./memory_pool
RUN pip install . && useradd --create-home --uid 1000 memorypool
USER memorypool

EXPOSE 3102
CMD ["memory-pool", "api", "--host", "0.0.0.0", "--port", "3102"]
