"""Device memory handed to another process as a file descriptor: CUDA's virtual memory management (driver API).

A contained candidate's process cannot open a CUDA IPC handle from inside bubblewrap's namespaces (measured on the
H200: ``cudaErrorMapBufferObjectFailed``), so the judge's arena used to cross through a file, request by request
(judge/arena.py, "staged"). Memory made with ``cuMemCreate`` and exported as a POSIX file descriptor
(``cuMemExportToShareableHandle``) is another matter: the descriptor travels over the judge's channel to the
candidate's process (a Unix socket, ``SCM_RIGHTS``), which imports and maps the same physical memory. No copy, no
path in any file system, nothing but the arena's own allocation reachable from it.

Only the calls this needs, through ctypes on the driver library torch has loaded; ``supported`` says whether the
device can (the attribute the driver reports), and anything that fails raises ``VmmError`` with the driver's words.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import torch

_POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_PINNED = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
_ON_DEVICE = 1  # CU_MEM_LOCATION_TYPE_DEVICE
_READ_WRITE = 3  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
_GRANULARITY_RECOMMENDED = 1
_ATTR_VMM = 102  # CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
_ATTR_POSIX_FD = 103  # CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED


class VmmError(RuntimeError):
    """A driver call failed: its name and the driver's own words."""


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Prop(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


@functools.cache
def _driver() -> Any:
    lib = ctypes.CDLL("libcuda.so.1")
    u64, size = ctypes.c_uint64, ctypes.c_size_t
    signatures = {
        "cuGetErrorString": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
        "cuDeviceGet": [ctypes.POINTER(ctypes.c_int), ctypes.c_int],
        "cuDeviceGetAttribute": [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int],
        "cuMemGetAllocationGranularity": [ctypes.POINTER(size), ctypes.POINTER(_Prop), ctypes.c_int],
        "cuMemCreate": [ctypes.POINTER(u64), size, ctypes.POINTER(_Prop), u64],
        "cuMemExportToShareableHandle": [ctypes.c_void_p, u64, ctypes.c_int, u64],
        "cuMemImportFromShareableHandle": [ctypes.POINTER(u64), ctypes.c_void_p, ctypes.c_int],
        "cuMemAddressReserve": [ctypes.POINTER(u64), size, size, u64, u64],
        "cuMemMap": [u64, size, size, u64, u64],
        "cuMemSetAccess": [u64, size, ctypes.POINTER(_AccessDesc), size],
        "cuMemUnmap": [u64, size],
        "cuMemAddressFree": [u64, size],
        "cuMemRelease": [u64],
    }
    for name, args in signatures.items():
        getattr(lib, name).argtypes = args
        getattr(lib, name).restype = ctypes.c_int
    return lib


def _call(name: str, *args: Any) -> None:
    lib = _driver()
    code = getattr(lib, name)(*args)
    if code:
        text = ctypes.c_char_p()
        lib.cuGetErrorString(code, ctypes.byref(text))
        raise VmmError(f"{name} failed: {(text.value or b'error').decode()} ({code})")


def _device(index: int) -> int:
    dev = ctypes.c_int()
    _call("cuDeviceGet", ctypes.byref(dev), index)
    return dev.value


def _index(device: str) -> int:
    return torch.device(device).index or 0


@functools.cache
def supported(device: str) -> bool:
    """Whether ``device`` (``cuda:N``) can export and import its memory as POSIX file descriptors."""
    if not device.startswith("cuda") or not torch.cuda.is_available():
        return False
    try:
        torch.cuda.init()
        dev = _device(_index(device))
        value = ctypes.c_int()
        for attribute in (_ATTR_VMM, _ATTR_POSIX_FD):
            _call("cuDeviceGetAttribute", ctypes.byref(value), attribute, dev)
            if not value.value:
                return False
        return True
    except (OSError, VmmError):
        return False


def _prop(dev: int) -> _Prop:
    prop = _Prop()
    prop.type = _PINNED
    prop.requestedHandleTypes = _POSIX_FD
    prop.location = _Location(_ON_DEVICE, dev)
    return prop


class _CudaArray:
    """What ``torch.as_tensor`` reads a mapping through (``__cuda_array_interface__``). The tensor made from it
    keeps it alive; when the last view of that tensor goes, the mapping is undone and the memory given back."""

    def __init__(self, mapping: Mapping) -> None:
        self.mapping = mapping
        self.__cuda_array_interface__ = {"shape": (mapping.size,), "typestr": "|u1", "data": (mapping.ptr, False),
                                         "version": 3, "strides": None}

    def __del__(self) -> None:
        try:
            self.mapping.release()
        except Exception:  # noqa: BLE001  (at interpreter exit the driver may be gone; the process ends anyway)
            pass


class Mapping:
    """Device memory mapped into this process: made here (``create``, exportable) or imported from a descriptor
    (``open``). ``tensor()`` hands it over as a uint8 tensor, which then owns it."""

    def __init__(self, device: str, handle: int, size: int) -> None:
        self.device, self.handle, self.size = device, handle, size
        self.ptr = 0
        dev = _device(_index(device))
        ptr = ctypes.c_uint64()
        try:
            _call("cuMemAddressReserve", ctypes.byref(ptr), size, 0, 0, 0)
            self.ptr = ptr.value
            _call("cuMemMap", self.ptr, size, 0, handle, 0)
            access = _AccessDesc(_Location(_ON_DEVICE, dev), _READ_WRITE)
            _call("cuMemSetAccess", self.ptr, size, ctypes.byref(access), 1)
        except VmmError:
            self.release()
            raise

    @classmethod
    def create(cls, device: str, nbytes: int) -> Mapping:
        """``nbytes`` (rounded up to the device's granularity) of new device memory, exportable as a descriptor."""
        torch.cuda.set_device(_index(device))
        torch.cuda.init()
        prop = _prop(_device(_index(device)))
        granularity = ctypes.c_size_t()
        _call("cuMemGetAllocationGranularity", ctypes.byref(granularity), ctypes.byref(prop),
              _GRANULARITY_RECOMMENDED)
        size = -(-nbytes // granularity.value) * granularity.value
        handle = ctypes.c_uint64()
        _call("cuMemCreate", ctypes.byref(handle), size, ctypes.byref(prop), 0)
        return cls(device, handle.value, size)

    @classmethod
    def open(cls, device: str, fd: int, size: int) -> Mapping:
        """The memory another process exported as ``fd`` (a descriptor received over a socket), mapped here."""
        torch.cuda.set_device(_index(device))
        handle = ctypes.c_uint64()
        _call("cuMemImportFromShareableHandle", ctypes.byref(handle), ctypes.c_void_p(fd), _POSIX_FD)
        return cls(device, handle.value, size)

    def export(self) -> int:
        """A new file descriptor for this memory (the caller closes it)."""
        fd = ctypes.c_int(-1)
        _call("cuMemExportToShareableHandle", ctypes.byref(fd), self.handle, _POSIX_FD, 0)
        return fd.value

    def tensor(self) -> torch.Tensor:
        """All of the memory as one uint8 tensor, which owns it from now on."""
        return torch.as_tensor(_CudaArray(self), device=self.device)

    def release(self) -> None:
        """Unmap and give the memory back (it lives on while another process maps it)."""
        if self.ptr:
            torch.cuda.synchronize(self.device)  # nothing queued may still touch it
            try:
                _call("cuMemUnmap", self.ptr, self.size)
            finally:
                _call("cuMemAddressFree", self.ptr, self.size)
                self.ptr = 0
        if self.handle:
            _call("cuMemRelease", self.handle)
            self.handle = 0
