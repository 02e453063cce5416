"""Memory the judge shares with the candidate's process: inputs going in, receive buffers for outputs coming back.

The judge owns one arena per device and lends the candidate's process views into it, by offset. Nothing else of
the judge's lives there: the reference, its outputs, the comparator's data stay in the judge's private memory
(on a GPU, another CUDA context: a kernel that reads out of bounds cannot reach them). Descriptors are plain
JSON-able dicts, so nothing the candidate's process sends back is ever unpickled.

- CPU (the Triton interpreter): a file in the judge's private directory mapped shared (``torch.from_file``).
- CUDA: one device allocation in a memory pool of its own, shared once per candidate process through torch's
  CUDA IPC (the same handles ``torch.multiprocessing`` uses), so its segment holds nothing but arena data.
- Staged (``mode="staged"``; a contained GPU candidate, whose process cannot open a CUDA IPC handle from inside its
  namespaces): each side keeps a private copy on its device, and the file of the CPU arena carries the bytes between
  them, request by request, region by region. Before a request the judge writes to the file every region the
  request names (``Arena.stage``); the candidate's process copies those onto its device (``ArenaView.pull``), serves
  the request, and writes back what it was asked to fill (receive buffers) and the inputs of a correctness call
  (the judge checks they were left as they were) before it replies (``push``); the judge reads those back
  (``unstage``). At every request boundary the judge sees what a shared allocation would show it; neither side
  ever maps the other's device memory. The price is the copies (measured in experiments/results/isolation/).
- Exported (``mode="exported"``; a contained GPU candidate where the driver can export memory as a file
  descriptor): the arena is made with CUDA's virtual memory management (judge/vmm.py) and its descriptor crosses
  the judge's channel to the candidate's process (``SCM_RIGHTS`` over the Unix socket), which maps the same
  memory: shared as CUDA IPC shares it, with no copies, through any namespaces. On the CPU the same protocol
  carries a ``memfd`` (no path at all), so the tests run it here.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from multiprocessing import reduction
from pathlib import Path
from typing import Any

import torch
from evoforge.judge.options import ARENA_MODES as MODES

ALIGN_BYTES = 512

DTYPES: dict[str, torch.dtype] = {str(d).removeprefix("torch."): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16, torch.int8,
    torch.uint8, torch.bool, torch.complex64, torch.complex128)}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _span_elements(shape: tuple[int, ...], stride: tuple[int, ...]) -> int:
    """Elements a strided view touches, from its first element to its last (non-negative strides)."""
    if any(s == 0 for s in shape):
        return 0
    return 1 + sum((n - 1) * st for n, st in zip(shape, stride, strict=True))


class Arena:
    """A bump allocator over shared memory; ``reset`` between phases. Grows (a new mapping) when a phase needs more."""

    def __init__(self, *, device: str, directory: Path, initial_bytes: int = 64 << 20, mode: str = "shared") -> None:
        if mode not in MODES:
            raise ValueError(f"arena mode {mode!r}: one of {', '.join(MODES)}")
        self.device = device
        self.directory = directory
        self.mode = mode
        self.generation = 0
        self.fd: int | None = None  # exported: the descriptor each candidate's process receives with the handle
        self._pool: Any = None
        self._buffer: torch.Tensor | None = None
        self._host: torch.Tensor | None = None  # staged: the file both sides copy through
        self._path: Path | None = None
        self._capacity = 0
        self._used = 0
        self._ensure(initial_bytes)

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def staged(self) -> bool:
        return self.mode == "staged"

    def _ensure(self, nbytes: int) -> None:
        if nbytes <= self._capacity:
            return
        # Doubling while small; past a gigabyte, what is asked and a quarter more (an old mapping lingers in the
        # candidate's process until it ends, so overshooting costs twice).
        capacity = max(nbytes, 2 * self._capacity if self._capacity < (1 << 30) else nbytes + nbytes // 4, 1 << 20)
        capacity = (capacity + ALIGN_BYTES - 1) // ALIGN_BYTES * ALIGN_BYTES
        self.close()
        if self.staged:
            self._map_file(capacity)
            self._buffer = torch.empty(capacity, dtype=torch.uint8, device=self.device)
        elif self.mode == "exported" and self.is_cuda:
            from evoforge.judge.vmm import Mapping

            mapping = Mapping.create(self.device, capacity)
            self.fd = mapping.export()
            capacity = mapping.size  # rounded up to the device's granularity
            self._buffer = mapping.tensor()
        elif self.mode == "exported":
            self.fd = os.memfd_create("evoforge-arena", os.MFD_CLOEXEC)
            os.ftruncate(self.fd, capacity)
            self._buffer = _map_fd(self.fd, capacity)
        elif self.is_cuda:
            pool_cls = getattr(torch.cuda, "MemPool", None)
            if pool_cls is not None:  # a segment of its own: an IPC handle exposes the whole segment
                self._pool = pool_cls()
                with torch.cuda.use_mem_pool(self._pool):
                    self._buffer = torch.empty(capacity, dtype=torch.uint8, device=self.device)
            else:
                self._buffer = torch.empty(capacity, dtype=torch.uint8, device=self.device)
        else:
            self._buffer = self._map_file(capacity)
        self._capacity = capacity
        self._used = 0
        self.generation += 1

    def _map_file(self, capacity: int) -> torch.Tensor:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._path = self.directory / f"arena-{secrets.token_hex(8)}.bin"
        self._host = torch.from_file(str(self._path), shared=True, size=capacity, dtype=torch.uint8)
        return self._host

    def handle(self) -> dict[str, Any]:
        """What the candidate's process needs to map the arena (sent over a pickling channel, judge to candidate)."""
        assert self._buffer is not None
        if self.mode == "exported":  # the descriptor (``fd``) follows the message that carries this handle
            return {"generation": self.generation, "fd_follows": True, "size": self._capacity,
                    "device": self.device}
        if self.is_cuda and not self.staged:
            return {"generation": self.generation, "cuda": self._buffer, "device": self.device}
        return {"generation": self.generation, "path": str(self._path), "size": self._capacity,
                "device": self.device, "staged": self.staged}

    def stage(self, payload: dict[str, Any]) -> dict[str, list[list[int]]] | None:
        """Staged: before a request, write every region the request names to the file; return what the candidate's
        process copies in (those regions) and what it writes back (its receive buffers, and the inputs of a call,
        which the judge checks were left as they were). None when nothing is staged."""
        if not self.staged or self._buffer is None or self._host is None:
            return None
        regions = _merge(list(_regions(payload)))
        out = _merge([r for key in ("receive", "inputs") for r in _regions(payload.get(key))])
        for start, nbytes in regions:
            self._host[start:start + nbytes].copy_(self._buffer[start:start + nbytes])
        return {"in": regions, "out": out}

    def unstage(self, stage: dict[str, list[list[int]]] | None) -> None:
        """Staged: after the reply, read back what the candidate's process wrote (``stage["out"]``)."""
        if stage and self._buffer is not None and self._host is not None:
            for start, nbytes in stage["out"]:
                self._buffer[start:start + nbytes].copy_(self._host[start:start + nbytes])

    def reset(self) -> None:
        self._used = 0

    def reserve(self, nbytes: int) -> None:
        """Make room for ``nbytes`` more in this phase before any view is handed out (growing drops old views)."""
        if self._used + nbytes > self._capacity:
            if self._used:
                raise RuntimeError("arena: grow only at the start of a phase")
            self._ensure(nbytes)

    def empty(self, shape: tuple[int, ...], dtype: torch.dtype,
              stride: tuple[int, ...] | None = None) -> tuple[torch.Tensor, dict[str, Any]]:
        """A tensor in the arena and its descriptor. Strides are kept (a transposed input stays transposed)."""
        shape = tuple(int(s) for s in shape)
        stride = tuple(int(s) for s in stride) if stride is not None else _contiguous_stride(shape)
        if any(s < 0 for s in stride):
            stride = _contiguous_stride(shape)
        element = torch.empty((), dtype=dtype).element_size()
        nbytes = _span_elements(shape, stride) * element
        start = (self._used + ALIGN_BYTES - 1) // ALIGN_BYTES * ALIGN_BYTES
        if start + nbytes > self._capacity:
            raise RuntimeError(f"arena: {start + nbytes} bytes needed, {self._capacity} reserved")
        self._used = start + nbytes
        assert self._buffer is not None
        region = self._buffer[start:start + max(nbytes, element)].view(dtype)
        tensor = region.as_strided(shape, stride)
        return tensor, {"offset": start, "nbytes": nbytes, "dtype": dtype_name(dtype), "shape": list(shape),
                        "stride": list(stride)}

    def close(self) -> None:
        self._buffer = None  # exported on a GPU: unmapped when the last view of it goes (judge/vmm.py)
        self._host = None
        self._pool = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self._path is not None:
            try:
                os.unlink(self._path)
            except OSError:
                pass
            self._path = None
        self._capacity = 0


def _map_fd(fd: int, size: int) -> torch.Tensor:
    """A shared mapping of the file behind ``fd`` (a memfd) as a uint8 tensor. Mapped through /proc/self/fd, as
    torch maps a file: it keeps no descriptor open (Python's ``mmap`` would keep a duplicate of ``fd``)."""
    return torch.from_file(f"/proc/self/fd/{fd}", shared=True, size=size, dtype=torch.uint8)


def send_fd(conn: Any, fd: int) -> None:
    """The arena's descriptor after the message that names it, on the same channel (a Unix socket: multiprocessing's
    own ``send_handle``, ``SCM_RIGHTS``)."""
    reduction.send_handle(conn, fd, None)


def receive_fd(conn: Any, message: Any) -> None:
    """If ``message`` (a spec or a request) carries an exported arena's handle, its descriptor is next on the
    channel: take it now, before anything else is read, into the handle (``handle["fd"]``)."""
    handle = message.get("arena") if isinstance(message, dict) else None
    if not (isinstance(handle, dict) and handle.get("fd_follows")):
        return
    try:
        handle["fd"] = reduction.recv_handle(conn)
    except RuntimeError as e:  # the next bytes were not a descriptor
        raise RuntimeError(f"arena: the judge's descriptor did not arrive with its handle ({e})") from e


def _contiguous_stride(shape: tuple[int, ...]) -> tuple[int, ...]:
    stride, acc = [], 1
    for n in reversed(shape):
        stride.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(stride))


def _regions(value: Any) -> Iterator[list[int]]:
    """The arena regions (offset, bytes) a request's payload names: every descriptor in it, at any depth."""
    if isinstance(value, dict):
        if "offset" in value and "nbytes" in value:
            yield [int(value["offset"]), max(int(value["nbytes"]), 1)]
        else:
            for item in value.values():
                yield from _regions(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _regions(item)


def _merge(regions: list[list[int]]) -> list[list[int]]:
    merged: list[list[int]] = []
    for start, nbytes in sorted(regions):
        if merged and start <= merged[-1][0] + merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], start + nbytes - merged[-1][0])
        else:
            merged.append([start, nbytes])
    return merged


def tensor_bytes(shape: tuple[int, ...], dtype: torch.dtype, stride: tuple[int, ...] | None = None) -> int:
    stride = stride if stride is not None and all(s >= 0 for s in stride) else _contiguous_stride(shape)
    return _span_elements(tuple(shape), tuple(stride)) * torch.empty((), dtype=dtype).element_size() + ALIGN_BYTES


def nested_bytes(value: Any) -> int:
    """Arena bytes a nested structure of tensors needs."""
    return sum(tensor_bytes(tuple(t.shape), t.dtype, tuple(t.stride())) for t in iter_tensors(value))


def iter_tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from iter_tensors(item)
    elif isinstance(value, dict):
        for key in sorted(value):
            yield from iter_tensors(value[key])


def share(arena: Arena, value: Any) -> tuple[Any, Any]:
    """Copy a nested structure's tensors into the arena: (the arena copy, its descriptor).

    A descriptor mirrors the structure: ``{"tensor": {...}}`` for a tensor, lists for lists and tuples,
    ``{"value": x}`` for anything else (ints, floats, None: what KernelBench inputs hold beside tensors).
    """
    if isinstance(value, torch.Tensor):
        tensor, desc = arena.empty(tuple(value.shape), value.dtype, tuple(value.stride()))
        tensor.copy_(value)
        return tensor, {"tensor": desc, "requires_grad": bool(value.requires_grad)}
    if isinstance(value, list | tuple):
        pairs = [share(arena, item) for item in value]
        return type(value)(p[0] for p in pairs), {"seq": [p[1] for p in pairs], "tuple": isinstance(value, tuple)}
    return value, {"value": value}


class ArenaView:
    """The candidate process's side: the arena mapped, descriptors turned into tensors (views, no copies)."""

    def __init__(self) -> None:
        self.generation = -1
        self._buffer: torch.Tensor | None = None
        self._host: torch.Tensor | None = None  # staged: the judge's file; ``_buffer`` is then this side's copy

    def attach(self, handle: dict[str, Any]) -> None:
        if handle["generation"] == self.generation:
            return
        self._buffer = self._host = None  # the old mapping (and device copy) go before the new one is made
        if "cuda" in handle:
            self._buffer = handle["cuda"]
        elif handle.get("fd_follows"):
            fd = handle["fd"]
            try:
                if str(handle["device"]).startswith("cuda"):
                    from evoforge.judge.vmm import Mapping

                    self._buffer = Mapping.open(handle["device"], fd, int(handle["size"])).tensor()
                else:
                    self._buffer = _map_fd(fd, int(handle["size"]))
            finally:
                os.close(fd)  # the mapping holds the memory; no descriptor of it stays open here
        else:
            mapped = torch.from_file(handle["path"], shared=True, size=int(handle["size"]), dtype=torch.uint8)
            if handle.get("staged"):
                self._host = mapped
                self._buffer = torch.zeros(int(handle["size"]), dtype=torch.uint8, device=handle["device"])
            else:
                self._buffer = mapped
        self.generation = handle["generation"]

    def pull(self, stage: dict[str, Any] | None) -> None:
        """Staged: the regions a request names, from the judge's file onto this side's copy, before it is served."""
        if stage and self._host is not None and self._buffer is not None:
            for start, nbytes in stage["in"]:
                self._buffer[start:start + nbytes].copy_(self._host[start:start + nbytes])
            if self._buffer.is_cuda:
                torch.cuda.synchronize(self._buffer.device)

    def push(self, stage: dict[str, Any] | None) -> None:
        """Staged: what the judge reads back, into the file before the reply (a copy to host memory waits for it)."""
        if stage and self._host is not None and self._buffer is not None:
            if self._buffer.is_cuda:
                torch.cuda.synchronize(self._buffer.device)
            for start, nbytes in stage["out"]:
                self._host[start:start + nbytes].copy_(self._buffer[start:start + nbytes])

    def tensor(self, desc: dict[str, Any]) -> torch.Tensor:
        assert self._buffer is not None, "arena not attached"
        dtype = DTYPES[desc["dtype"]]
        element = torch.empty((), dtype=dtype).element_size()
        start, nbytes = int(desc["offset"]), int(desc["nbytes"])
        region = self._buffer[start:start + max(nbytes, element)].view(dtype)
        return region.as_strided(tuple(desc["shape"]), tuple(desc["stride"]))

    def build(self, desc: Any) -> Any:
        if "tensor" in desc:
            return self.tensor(desc["tensor"])
        if "seq" in desc:
            items = [self.build(d) for d in desc["seq"]]
            return tuple(items) if desc.get("tuple") else items
        return desc["value"]
