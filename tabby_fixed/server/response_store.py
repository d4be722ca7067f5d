"""Stored responses, so ``previous_response_id`` can continue a conversation and
``GET /v1/responses/{id}`` can fetch one.

In memory only (a restart forgets them), bounded in count (``network.responses_store_size``,
the oldest goes first) and in age (``network.responses_store_ttl`` seconds since stored).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StoredResponse:
    response: dict[str, Any]  # the response object, as GET returns it
    items: list[dict[str, Any]]  # the whole conversation as input items: history, input, then output
    expires: float


class ResponseStore:
    def __init__(self, size: int, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._size = size
        self._ttl = ttl
        self._clock = clock
        self._entries: OrderedDict[str, StoredResponse] = OrderedDict()

    def put(self, response: dict[str, Any], items: list[dict[str, Any]]) -> None:
        self._expire()
        if self._size <= 0:
            return
        self._entries[response["id"]] = StoredResponse(response, items, self._clock() + self._ttl)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def get(self, response_id: str) -> StoredResponse | None:
        self._expire()
        return self._entries.get(response_id)

    def delete(self, response_id: str) -> bool:
        self._expire()
        return self._entries.pop(response_id, None) is not None

    def __len__(self) -> int:
        self._expire()
        return len(self._entries)

    def _expire(self) -> None:
        """Entries expire in the order they were stored, so only the oldest need looking at."""
        now = self._clock()
        while self._entries:
            oldest = next(iter(self._entries.values()))
            if oldest.expires > now:
                return
            self._entries.popitem(last=False)
