"""evalkit.sources.textio: reading answers robustly (encodings, newlines, binaries, sizes, OS errors)."""

from __future__ import annotations

import codecs
import random
from pathlib import Path

import pytest

from evalkit.sources import textio
from evalkit.intake.extract import extract
from evalkit.sources.textio import MAX_TEXT_BYTES, UnreadableText, decode_text, normalise_newlines, read_text

ANSWER = "Here it is:\n```python\nclass ModelNew:\n    pass\n```\n"


def write(tmp_path: Path, data: bytes, name: str = "answer.txt") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_plain_utf8(tmp_path: Path) -> None:
    text = ANSWER + "π ≈ 3.14 — ok\n"
    assert read_text(write(tmp_path, text.encode("utf-8"))) == (text, [])


def test_empty_file(tmp_path: Path) -> None:
    assert read_text(write(tmp_path, b"")) == ("", [])
    assert extract("").reason == "empty text"


def test_utf8_bom_is_stripped(tmp_path: Path) -> None:
    text, warnings = read_text(write(tmp_path, codecs.BOM_UTF8 + ANSWER.encode("utf-8")))
    assert text == ANSWER and warnings == []
    assert extract(text).block.fence_line == 2


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_with_bom(encoding: str) -> None:
    bom = {"utf-16": b"", "utf-16-le": codecs.BOM_UTF16_LE, "utf-16-be": codecs.BOM_UTF16_BE}[encoding]
    data = bom + (ANSWER + "é\n").encode(encoding)  # plain "utf-16" writes its own BOM
    text, warnings = decode_text(data, "a.txt")
    assert text == ANSWER + "é\n" and not text.startswith("\ufeff")
    assert len(warnings) == 1 and "UTF-16" in warnings[0]


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf16_without_bom_is_recognised_not_binary(encoding: str) -> None:
    text, warnings = decode_text(ANSWER.encode(encoding), "a.txt")
    assert text == ANSWER and "no byte-order mark" in warnings[0]


def test_crlf_and_lone_cr_become_newlines_keeping_line_numbers(tmp_path: Path) -> None:
    text, warnings = read_text(write(tmp_path, b"one\r\ntwo\rthree\n\r\nfive\r"))
    assert text == "one\ntwo\nthree\n\nfive\n" and warnings == []
    crlf = ANSWER.replace("\n", "\r\n").encode("utf-8")
    text, _ = read_text(write(tmp_path, crlf, "crlf.txt"))
    assert "\r" not in text and extract(text).block.start_line == 3


def test_normalise_newlines() -> None:
    assert normalise_newlines("a\r\nb\rc\n\r\n") == "a\nb\nc\n\n"
    text = "no carriage return\n"
    assert normalise_newlines(text) is text


def test_invalid_utf8_is_replaced_with_a_warning(tmp_path: Path) -> None:
    path = write(tmp_path, b"ok\nbad \xff\xfe\xfd here\n" + ANSWER.encode("utf-8"), "file.txt")
    text, warnings = read_text(path)
    assert text.startswith("ok\nbad \ufffd\ufffd\ufffd here\n") and text.endswith(ANSWER)
    assert warnings == [f"{path}: 3 bytes are not valid UTF-8 (replaced with U+FFFD; first on line 2)"]
    assert extract(text).block.fence_line == 4


def test_one_invalid_byte_is_singular() -> None:
    _, warnings = decode_text(b"caf\xe9\n", "x.txt")
    assert warnings == ["x.txt: 1 byte is not valid UTF-8 (replaced with U+FFFD; first on line 1)"]


def test_real_replacement_characters_are_not_counted() -> None:
    text, warnings = decode_text("\ufffd fine\n".encode("utf-8") + b"\xc3\n", "x.txt")
    assert text == "\ufffd fine\n\ufffd\n" and "1 byte is" in warnings[0] and "line 2" in warnings[0]


def test_binary_file_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x00>\x00", "model.bin")
    with pytest.raises(UnreadableText) as err:
        read_text(path)
    assert str(err.value) == (f"{path}: looks like a binary file (NUL bytes), not a text answer; "
                              f"remove it or convert it to text")


def test_nul_after_the_sniffed_prefix_is_not_binary() -> None:
    text, _ = decode_text(b"a" * 9000 + b"\x00", "x.txt")
    assert len(text) == 9001


def test_too_large(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert MAX_TEXT_BYTES == 64 * 1024 * 1024
    monkeypatch.setattr(textio, "MAX_TEXT_BYTES", 10)
    path = write(tmp_path, b"x" * 11)
    with pytest.raises(UnreadableText, match=r"answer\.txt: 11 bytes is over the 10-byte limit"):
        read_text(path)
    with pytest.raises(UnreadableText, match=r"big: 11 bytes is over the 10-byte limit"):
        decode_text(b"x" * 11, "big")
    assert read_text(write(tmp_path, b"x" * 10, "ok.txt")) == ("x" * 10, [])


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.txt"
    with pytest.raises(UnreadableText) as err:
        read_text(path)
    assert str(path) in str(err.value) and "No such file" in str(err.value)


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(UnreadableText, match="is a folder"):
        read_text(tmp_path)


def test_permission_denied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, b"hello")

    def refuse(self: Path, *args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "open", refuse)  # root ignores chmod, so simulate the OS refusing
    with pytest.raises(UnreadableText) as err:
        read_text(path)
    assert str(err.value) == f"{path}: cannot read it (Permission denied); check that it exists and is readable"


def test_random_bytes_never_raise_anything_else() -> None:
    rng = random.Random(0)
    for _ in range(300):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200)))
        try:
            text, warnings = decode_text(data, "fuzz")
        except UnreadableText:
            continue
        assert isinstance(text, str) and "\r" not in text and all(isinstance(w, str) for w in warnings)
        extract(text)
