"""The bodies of POST /v1/embeddings as OpenAI's API defines them, and its error body."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

Text = Annotated[str, Field(min_length=1)]


class EmbeddingsRequest(BaseModel):
    """OpenAI's embeddings request; `user` and other fields OpenAI knows are ignored."""

    model_config = ConfigDict(extra="ignore")

    model: str = Field(
        min_length=1,
        description="The embedding model. memory-pool embeds with its own (EMBEDDING_MODEL); "
        "another name is served by it too unless MEMORY_POOL_EMBEDDINGS_ANY_MODEL is false, "
        "and then refused (404).",
    )
    input: Text | Annotated[list[Text], Field(min_length=1)] = Field(
        description="A text or a list of texts, none empty (token arrays are not taken)."
    )
    encoding_format: Literal["float", "base64"] | None = Field(
        None, description="float (the default) or base64 of little-endian float32."
    )
    dimensions: int | None = Field(
        None,
        ge=1,
        strict=True,
        description="Must be the model's own size when given: vectors are never shortened.",
    )


class Embedding(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str = Field(description="The vector, or its base64.")


class Usage(BaseModel):
    prompt_tokens: int = Field(description="An estimate: memory-pool counts no tokens.")
    total_tokens: int


class EmbeddingsResponse(BaseModel):
    object: Literal["list"] = "list"
    data: list[Embedding]
    model: str = Field(description="The model that embedded: memory-pool's own.")
    usage: Usage


class OpenAIErrorDetail(BaseModel):
    message: str
    type: str = Field(description="invalid_request_error or server_error, as OpenAI's.")
    param: str | None = Field(description="The request field at fault, if one is.")
    code: str | None = Field(description="A stable code, if there is one.")


class OpenAIErrorResponse(BaseModel):
    error: OpenAIErrorDetail
