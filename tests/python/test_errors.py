"""Bad input from Python raises nmkit.Error of the right class (ValueError for arguments and data,
OSError for files) with the library's one-line message, and writes nothing."""
import os

import numpy as np
import pytest

import nmkit


def w(shape=(4, 8)):
    return np.random.default_rng(1).standard_normal(shape).astype(np.float32)


def raises(cls, code, fn, *args, **kwargs):
    with pytest.raises(cls) as info:
        fn(*args, **kwargs)
    e = info.value
    assert isinstance(e, nmkit.Error) and e.code == code, (type(e), e.code, e)
    assert str(e) == e.message and "\n" not in e.message and e.message
    return e


def test_error_classes_derive_from_the_python_exceptions():
    assert issubclass(nmkit.InvalidArgumentError, ValueError) and issubclass(nmkit.InvalidValueError, ValueError)
    assert issubclass(nmkit.InvalidFileError, ValueError) and issubclass(nmkit.UnsupportedError, ValueError)
    assert issubclass(nmkit.NotFoundError, FileNotFoundError) and issubclass(nmkit.IoError, OSError)
    assert issubclass(nmkit.SameFileError, OSError)
    assert all(issubclass(c, nmkit.Error) for c in (nmkit.NotFoundError, nmkit.LimitError, nmkit.IoError))


def test_bad_pattern_method_and_format():
    raises(nmkit.InvalidArgumentError, nmkit.ErrorCode.InvalidArgument, nmkit.prune, w(), "5:4")
    raises(nmkit.InvalidArgumentError, nmkit.ErrorCode.InvalidArgument, nmkit.prune, w(), "2:4", method="best")
    raises(nmkit.InvalidArgumentError, nmkit.ErrorCode.InvalidArgument, nmkit.compress, w(), "csr")
    raises(nmkit.InvalidArgumentError, nmkit.ErrorCode.InvalidArgument, nmkit.SparseLinear, w(), format="csr")


def test_nan_names_tensor_row_and_column():
    x = w()
    x[1, 2] = np.nan
    e = raises(nmkit.InvalidValueError, nmkit.ErrorCode.InvalidValue, nmkit.prune, x, "2:4", name="blk.0.q")
    assert e.tensor == "blk.0.q" and "row 1" in e.message and "column 2" in e.message
    lin = nmkit.SparseLinear(w())
    e = raises(nmkit.InvalidValueError, nmkit.ErrorCode.InvalidValue, lin, x)
    assert "row 1" in e.message and "column 2" in e.message


def test_wrong_dtype_rank_layout_and_type():
    raises(nmkit.UnsupportedError, nmkit.ErrorCode.Unsupported, nmkit.prune, w().astype(np.int32), "2:4")
    raises(nmkit.UnsupportedError, nmkit.ErrorCode.Unsupported, nmkit.prune, w().astype(np.complex64), "2:4")
    raises(nmkit.InvalidArgumentError, nmkit.ErrorCode.InvalidArgument, nmkit.prune, w()[0], "2:4")
    e = raises(nmkit.InvalidArgumentError, nmkit.ErrorCode.InvalidArgument, nmkit.prune, w((4, 16))[:, ::2], "2:4")
    assert "C-contiguous" in e.message
    raises(nmkit.InvalidArgumentError, nmkit.ErrorCode.InvalidArgument, nmkit.prune, [[1.0, 2.0]], "2:4")
    lin = nmkit.SparseLinear(w())
    raises(nmkit.InvalidArgumentError, nmkit.ErrorCode.InvalidArgument, lin, np.ones((2, 9), np.float32))


def test_non_compliant_weight():
    e = raises(nmkit.InvalidValueError, nmkit.ErrorCode.InvalidValue, nmkit.compress, np.ones((2, 8), np.float32))
    assert "row 0, group 0" in e.message
    raises(nmkit.InvalidValueError, nmkit.ErrorCode.InvalidValue, nmkit.slide, np.ones((2, 8), np.float32), "6:8")


def test_missing_and_malformed_files(tmp_path):
    missing = str(tmp_path / "absent.safetensors")
    e = raises(nmkit.NotFoundError, nmkit.ErrorCode.NotFound, nmkit.load_safetensors, missing)
    assert e.file == missing and e.filename == missing and isinstance(e, FileNotFoundError)
    raises(nmkit.NotFoundError, nmkit.ErrorCode.NotFound, nmkit.Model.load, missing)
    raises(nmkit.NotFoundError, nmkit.ErrorCode.NotFound, nmkit.inspect, missing)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}")
    raises(nmkit.InvalidFileError, nmkit.ErrorCode.InvalidFile, nmkit.load_safetensors, str(bad))
    raises(nmkit.InvalidFileError, nmkit.ErrorCode.InvalidFile, nmkit.inspect, str(bad))


def test_failed_write_leaves_nothing(tmp_path):
    out = tmp_path / "out.safetensors"
    with pytest.raises(nmkit.Error):
        nmkit.save_safetensors(out, {"a": np.ones(3, np.float32), "b": np.ones((2, 2), np.complex64)})
    assert os.listdir(tmp_path) == []
    with pytest.raises(OSError):
        nmkit.save_safetensors(tmp_path / "no" / "such" / "folder.safetensors", {"a": np.ones(3, np.float32)})
