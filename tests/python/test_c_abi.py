"""The Python side of the C ABI agrees with include/dash_attn/c_api.h, and a
library of another ABI version is refused at load. Needs neither torch nor a GPU."""
import ctypes
import importlib.util
import pathlib
import re
import shutil
import subprocess

import pytest

_root = pathlib.Path(__file__).resolve().parents[2]
_header = _root / "include" / "dash_attn" / "c_api.h"


def _load_by_path(name, relative):
    spec = importlib.util.spec_from_file_location(name, _root / relative)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


library = _load_by_path("dash_attn_library", "python/dash_attn/_library.py")
checks = _load_by_path("dash_attn_checks_for_abi", "python/dash_attn/_checks.py")


def header_constants():
    """Every DASH_* name with an integer value: enumerators and #defines."""
    text = re.sub(r"/\*.*?\*/", "", _header.read_text(), flags=re.S)
    found = dict(re.findall(r"\b(DASH_[A-Z0-9_]+)\s*=\s*(-?\d+)", text))
    found.update(re.findall(r"^\s*#\s*define\s+(DASH_[A-Z0-9_]+)\s+(-?\d+)\s*$", text, flags=re.M))
    return {name: int(value) for name, value in found.items()}


def python_constants():
    return {name: value for name, value in vars(library).items() if name.startswith("DASH_") and isinstance(value, int)}


def test_header_parse_finds_every_group():
    names = header_constants()
    assert "DASH_ATTN_ABI_VERSION" in names and "DASH_OK" in names
    for prefix in ("DASH_DTYPE_", "DASH_SCHEDULE_", "DASH_ERROR_", "DASH_PASS_"):
        assert any(name.startswith(prefix) for name in names), prefix


def test_python_constants_equal_the_header():
    assert python_constants() == header_constants()


def test_schedule_names_map_to_their_own_codes():
    header = header_constants()
    schedule_macros = {name for name in header if name.startswith("DASH_SCHEDULE_")}
    assert {f"DASH_SCHEDULE_{name.upper()}" for name in library.SCHEDULE_CODES} == schedule_macros
    for name, code in library.SCHEDULE_CODES.items():
        assert code == header[f"DASH_SCHEDULE_{name.upper()}"], name
    assert set(library.SCHEDULE_CODES) == set(checks.SCHEDULES)


def test_every_error_code_has_an_exception():
    header = header_constants()
    error_codes = {value for name, value in header.items() if name.startswith("DASH_ERROR_")}
    assert set(library.ERROR_EXCEPTIONS) == error_codes
    assert header["DASH_OK"] not in error_codes
    assert library.ERROR_EXCEPTIONS[header["DASH_ERROR_INVALID_ARGUMENT"]] is ValueError
    assert library.ERROR_EXCEPTIONS[header["DASH_ERROR_NOT_SUPPORTED"]] is ValueError
    assert library.ERROR_EXCEPTIONS[header["DASH_ERROR_NOT_IMPLEMENTED"]] is NotImplementedError
    assert library.ERROR_EXCEPTIONS[header["DASH_ERROR_CUDA"]] is RuntimeError


def test_options_carry_the_named_schedule_code():
    for name, code in library.SCHEDULE_CODES.items():
        assert library.make_options(True, None, name != "atomic", name).schedule == code
    with pytest.raises(ValueError, match="'schedule'.*'bogus'"):
        library.make_options(True, None, True, "bogus")


def header_structs():
    """typedef struct { ... } DashName; -> [(field, C type)], pointers as "*"."""
    text = re.sub(r"/\*.*?\*/", "", _header.read_text(), flags=re.S)
    structs = {}
    for body, name in re.findall(r"typedef\s+struct\s*\{(.*?)\}\s*(Dash\w+)\s*;", text, flags=re.S):
        fields = []
        for declaration in filter(None, (d.strip() for d in body.split(";"))):
            kind, names = re.match(r"((?:const\s+)?\w+\s*\**)\s*(.*)", declaration).groups()
            kind = "*" if "*" in kind else kind.strip()
            fields += [(field.strip(), kind) for field in names.split(",")]
        structs[name] = fields
    return structs


_C_TYPES = {"int64_t": ctypes.c_int64, "int32_t": ctypes.c_int32, "float": ctypes.c_float, "*": ctypes.c_void_p}


def test_ctypes_structs_match_the_header_layouts():
    """Every struct of the header has its ctypes twin (DashX <-> library.X) with
    the same fields in the same order and types, so both sides agree on offsets."""
    structs = header_structs()
    assert {"DashShape", "DashTensor", "DashLse", "DashOptions", "DashVarlenLengths", "DashKernelRow",
            "DashSinks"} <= set(structs)
    for name, fields in structs.items():
        twin = getattr(library, name[len("Dash"):])
        # KernelRow spells C's `pass` as pass_ (a Python keyword).
        assert [(field.rstrip("_"), kind) for field, kind in twin._fields_] == \
            [(field, _C_TYPES[kind]) for field, kind in fields], name


def test_ctypes_offsets_and_sizes_equal_the_c_compilers(tmp_path):
    """The C compiler's offsetof/sizeof of every field of every header struct
    equal ctypes' (padding included: DashOptions' trailing float after the
    int32 window, DashSinks' two pointers)."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler")
    structs = header_structs()
    lines = ["#include <stdio.h>", "#include <stddef.h>", '#include "dash_attn/c_api.h"', "int main(void) {"]
    for name, fields in structs.items():
        lines.append(f'  printf("{name} sizeof %zu\\n", sizeof({name}));')
        lines += [f'  printf("{name} {field} %zu\\n", offsetof({name}, {field}));' for field, _ in fields]
    lines += ["  return 0;", "}"]
    source = tmp_path / "layout.c"
    source.write_text("\n".join(lines) + "\n")
    binary = tmp_path / "layout"
    subprocess.run([compiler, "-I", str(_root / "include"), "-o", str(binary), str(source)], check=True)
    printed = dict(line.rsplit(" ", 1) for line in subprocess.run([str(binary)], check=True, capture_output=True,
                                                                  text=True).stdout.splitlines())
    for name, fields in structs.items():
        twin = getattr(library, name[len("Dash"):])
        assert int(printed[f"{name} sizeof"]) == ctypes.sizeof(twin), name
        for (field, _), (python_field, _) in zip(fields, twin._fields_):
            assert int(printed[f"{name} {field}"]) == getattr(twin, python_field).offset, f"{name}.{field}"


def test_options_and_sinks_carry_window_softcap_and_pointers():
    options = library.make_options(True, 0.5, True, "descending", sm_margin=2, window_left=128, window_right=0,
                                   softcap=30.0)
    assert (options.has_window, options.window_left, options.window_right, options.softcap,
            options.sm_margin) == (1, 128, 0, 30.0, 2)
    default = library.make_options(False, None, True, "auto")
    assert (default.has_window, default.window_left, default.window_right, default.softcap) == (0, -1, -1, 0.0)
    assert library.sinks_of(None) is None

    class Pointer:
        def __init__(self, address):
            self.address = address

        def data_ptr(self):
            return self.address

    sinks = library.sinks_of(Pointer(4096), Pointer(8192))._obj
    assert (sinks.sinks, sinks.dsinks) == (4096, 8192)
    assert library.sinks_of(Pointer(4096))._obj.dsinks is None


def test_compute_functions_take_the_sinks_right_before_the_options(tmp_path, load_with):
    """The argtypes ctypes converts with: a DashSinks pointer before DashOptions in all four calls."""
    lib = load_with(_fake_library(tmp_path, library.DASH_ATTN_ABI_VERSION))
    sinks, options = ctypes.POINTER(library.Sinks), ctypes.POINTER(library.Options)
    header = re.sub(r"/\*.*?\*/", "", _header.read_text(), flags=re.S)
    for function in ("dash_forward", "dash_forward_varlen", "dash_backward", "dash_backward_varlen"):
        argtypes = getattr(lib, function).argtypes
        assert argtypes[-3:] == [sinks, options, ctypes.c_void_p], function
        declared = re.search(rf"\b{function}\s*\((.*?)\)\s*;", header, flags=re.S).group(1).split(",")
        assert len(declared) == len(argtypes), function
        assert "DashSinks" in declared[-3] and "DashOptions" in declared[-2], function


def _fake_library(tmp_path, version):
    """A shared library exporting the C ABI's symbols as stubs; `version` None
    leaves dash_abi_version out, as in a library older than the version rule."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler to build a fake library")
    stubs = ["int dash_forward(void) { return 0; }", "int dash_forward_varlen(void) { return 0; }",
             "int dash_backward(void) { return 0; }",
             "int dash_backward_workspace_size(void) { return 0; }", "int dash_backward_varlen(void) { return 0; }",
             "int dash_backward_varlen_workspace_size(void) { return 0; }",
             "const char* dash_last_error(void) { return \"\"; }",
             "int dash_compiled_kernels(void) { return 0; }"]
    if version is not None:
        stubs.append(f"int dash_abi_version(void) {{ return {version}; }}")
    source = tmp_path / "fake.c"
    source.write_text("\n".join(stubs) + "\n")
    path = tmp_path / f"libfake_{version}.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(path), str(source)], check=True)
    return path


@pytest.fixture
def load_with(monkeypatch):
    def load(path):
        monkeypatch.setenv("DASH_ATTN_LIBRARY", str(path))
        monkeypatch.setattr(library, "_library", None)
        return library._load()
    return load


@pytest.mark.parametrize("version", [library.DASH_ATTN_ABI_VERSION + 1, None])
def test_wrong_abi_version_is_refused_naming_both_versions(tmp_path, load_with, version):
    path = _fake_library(tmp_path, version)
    with pytest.raises(ImportError) as raised:
        load_with(path)
    message = str(raised.value)
    assert str(path) in message
    assert f"expects version {library.DASH_ATTN_ABI_VERSION}" in message
    assert (f"version {version}," if version is not None else "no dash_abi_version symbol") in message


def test_matching_abi_version_loads(tmp_path, load_with):
    lib = load_with(_fake_library(tmp_path, library.DASH_ATTN_ABI_VERSION))
    assert lib.dash_abi_version() == library.DASH_ATTN_ABI_VERSION


def test_unloadable_file_is_an_import_error(tmp_path, load_with):
    path = tmp_path / "libnot_a_library.so"
    path.write_text("not an ELF file")
    with pytest.raises(ImportError, match=re.escape(str(path))):
        load_with(path)


def test_header_declares_the_version_function():
    assert re.search(r"int32_t\s+dash_abi_version\s*\(\s*void\s*\)", _header.read_text())
