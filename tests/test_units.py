"""Reading what users type (sizes, micro-batch counts, GPUs, speeds, settings) and writing sizes back."""
from __future__ import annotations

import re

import pytest

from pipebench.base.errors import DeviceError, UserError
from pipebench.base.text.parse import (AutoGpus, parse_gpus, parse_int, parse_micro_batches, parse_number,
                             parse_override, parse_speeds)
from pipebench.request import virtual_stages
from pipebench.base.text.units import GIB, MIB, format_bytes, format_count, format_gib, parse_size


def test_parse_size():
    assert parse_size("20GiB") == 20 * 2**30
    assert parse_size("512MB") == 512 * 10**6
    assert parse_size("1e3") == parse_size("1000") == 1000
    assert parse_size("1.5 gib") == int(1.5 * 2**30)
    assert parse_size(" 2 KiB ") == 2048


@pytest.mark.parametrize("text", ["lots", "", "20 GiBs", "-1GiB", "1,5GiB", "²GiB", "١٢GiB"])
def test_parse_size_rejects(text):
    with pytest.raises(UserError, match=f"cannot read memory size {text!r}; write it like 20GiB"):
        parse_size(text)


@pytest.mark.parametrize("text", ["1e999", "2000000TiB", "1e30"])
def test_parse_size_refuses_sizes_beyond_any_memory(text):
    """1e999 is refused as a size, not an OverflowError converting infinity to an int."""
    with pytest.raises(UserError, match=f"memory size {text!r} is too large"):
        parse_size(text)


@pytest.mark.parametrize("text, low, high, value", [("5", 1, 10, 5), (" 7 ", 0, 10, 7), ("-3", -5, 5, -3)])
def test_parse_int_reads_ascii_digits(text, low, high, value):
    assert parse_int(text, "--x", low, high) == value


@pytest.mark.parametrize("text", ["²", "١٢", "+1", "1_0", "1.0", "", "0", "11", "9" * 5000])
def test_parse_int_refuses_what_is_not_an_ascii_count_in_range(text):
    with pytest.raises(UserError, match=r"--x takes a positive integer up to 10 \(got"):
        parse_int(text, "--x", 1, 10)


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e400", "١", "²", "0", "11", "x"])
def test_parse_number_is_finite_and_in_range(text):
    with pytest.raises(UserError, match=r"--x takes a number from 0.5 to 10"):
        parse_number(text, "--x", 0.5, 10)
    assert parse_number("2.5e0", "--x", 0.5, 10) == 2.5


def test_format_bytes_gib_and_count():
    assert format_bytes(1.5 * GIB) == "1.50 GiB"
    assert format_bytes(12 * MIB) == "12.00 MiB"
    assert format_bytes(2048) == "2.00 KiB"
    assert format_bytes(512) == "512 B"
    assert format_bytes(parse_size("20GiB")) == "20.00 GiB"
    assert format_gib(40 * GIB) == "40.0" and format_gib(0) == "0.0"
    assert format_gib(0.0568 * GIB) == "0.0568" and format_gib(0.1 * GIB) == "0.1"  # tiny models are not "0.0"
    assert [format_count(n) for n in (999, 1000, 45_600_000, 1_230_000_000)] == ["999", "1.00K", "45.60M", "1.23B"]


def test_micro_batches():
    assert parse_micro_batches("auto") == [None]
    assert parse_micro_batches("4") == [4]
    assert parse_micro_batches("2, 4,auto") == [2, 4, None]
    assert parse_micro_batches("auto,4,auto,4") == [None, 4]  # one case each
    for bad in ("0", "two", "2,,4", "", "²", "auto,²", "١٢", "+2", "99999999999999999999"):
        with pytest.raises(UserError, match="--micro-batches takes positive integers and/or auto, comma-separated"):
            parse_micro_batches(bad)
    assert parse_micro_batches("auto", single=True) == [None] and parse_micro_batches("8", single=True) == [8]
    for bad in ("many", "0", "-2", "²"):
        with pytest.raises(UserError, match="--micro-batches takes a positive integer or auto"):
            parse_micro_batches(bad, single=True)
    with pytest.raises(UserError, match="--micro-batches takes one count or auto here"):
        parse_micro_batches("2,4", single=True)


def test_parse_gpus():
    assert parse_gpus("0,1") == [0, 1] == parse_gpus("0, 1")
    assert parse_gpus("auto:2") == AutoGpus(2) and parse_gpus("auto:2").count == 2


@pytest.mark.parametrize("text, message", [
    ("a,b", "--gpus takes comma-separated GPU ids such as 0,1"),
    (",", "--gpus names no GPU"),
    ("-1", "GPU ids are >= 0"),
    ("0,0", "--gpus names a GPU twice"),
    ("auto", "--gpus auto:N takes a number of GPUs, e.g. auto:2"),
    ("auto:two", "--gpus auto:N takes a number of GPUs"),
    ("auto:0", "auto:N takes N >= 1 (got 0)"),
    ("auto:²", "--gpus auto:N takes a number of GPUs"),  # '²'.isdigit(), and int('²') fails
    ("auto²", "--gpus auto:N takes a number of GPUs"),
    ("auto:99999", "--gpus auto:N takes a positive integer up to 1,024"),
    ("", "--gpus names no GPU"),
    ("٠", "--gpus takes comma-separated GPU ids"),
])
def test_parse_gpus_rejects(text, message):
    with pytest.raises(DeviceError, match=re.escape(message)):
        parse_gpus(text)


def test_parse_speeds():
    assert parse_speeds(None, 2) is None
    assert parse_speeds("auto", 2) == "auto"
    assert parse_speeds("1,0.5", 2) == [1.0, 0.5]
    with pytest.raises(UserError, match="--speeds takes auto or comma-separated positive numbers"):
        parse_speeds("fast", 2)
    for bad in ("1", "1,0", "1,-1"):
        with pytest.raises(UserError, match=r"--speeds needs one positive factor per device \(2\)"):
            parse_speeds(bad, 2)


def test_parse_override():
    assert parse_override("depth=8") == ("depth", 8)
    assert parse_override("dropout=0.1") == ("dropout", 0.1)
    assert parse_override("act=gelu") == ("act", "gelu")
    assert parse_override("name=") == ("name", "")
    assert parse_override("depth=١٢") == ("depth", "١٢")  # not a number: the model refuses it as one
    for bad in ("depth", "=3"):
        with pytest.raises(UserError, match="--set takes KEY=VALUE"):
            parse_override(bad)
    for bad in ("depth=99999999999", "width=1e400", "dropout=nan"):
        with pytest.raises(UserError, match=f"--set {bad.split('=')[0]} takes"):
            parse_override(bad)


def test_virtual_stages():
    assert virtual_stages("1f1b", None) == virtual_stages("gpipe", 1) == 1
    assert virtual_stages("interleaved", None) == virtual_stages("zbv", 2) == 2
    assert virtual_stages("zb-interleaved", 3) == 3
    for schedule, asked, message in [("1f1b", 2, "1f1b runs one stage per device"),
                                     ("zbv", 3, "zbv runs exactly 2 stages per device"),
                                     ("interleaved", 0, "virtual_stages takes a positive integer")]:
        with pytest.raises(UserError, match=message):
            virtual_stages(schedule, asked)
