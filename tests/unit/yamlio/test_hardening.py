"""Bounds and masks that hold whatever the input: parser depth in a real process, Secret values in diffs,
the shape checker's messages."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys

import pytest

from reconciler import yamlio
from reconciler.yamlio import codec
from reconciler.cluster.apply import describe_diff
from reconciler.errors import InputError
from reconciler.model.shape import INT, STR, ListOf, MapOf, Obj, check
from tests.support.paths import ROOT



@pytest.mark.parametrize("text", ["[" * 50_000 + "]" * 50_000, "- " * 50_000 + "x", "a: " + "{b: " * 50_000])
def test_deep_nesting_is_refused_in_a_real_process_without_crashing(text, tmp_path):
    # In-process this would kill pytest itself if the C parser recursed: run it where a crash shows as a signal.
    (tmp_path / "deep.yaml").write_text(text)
    code = ("import sys\nfrom reconciler import yamlio\nfrom reconciler.errors import InputError\n"
            "try:\n    yamlio.read_all(sys.argv[1], 'deep.yaml')\nexcept InputError as e:\n"
            "    print(e.message)\n    sys.exit(2)\n")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "deep.yaml")], capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT)}, timeout=120)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert f"nested more than {yamlio.MAX_DEPTH} levels deep" in done.stdout


@pytest.mark.parametrize("strict", [True, False], ids=["declaration", "catalog"])
@pytest.mark.parametrize("depth", [1_500, 50_000])
def test_deep_flow_nesting_after_a_key_gets_one_message_whichever_parser_notices(depth, strict, tmp_path):
    """libyaml (in PyYAML 6.0.4 and later) refuses flow nesting past its own limit while reading ahead,
    before our count reaches ``MAX_DEPTH``: the user still gets the same input error, with the file."""
    (tmp_path / "deep.yaml").write_text("spec: " + "[" * depth + "]" * depth + "\n")
    code = ("import sys\nfrom reconciler import yamlio\nfrom reconciler.errors import InputError\n"
            "try:\n    yamlio.read_all(sys.argv[1], 'operators/deep.yaml', strict=sys.argv[2] == '1')\n"
            "except InputError as e:\n    print(e.path, e.message)\n    sys.exit(2)\n")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "deep.yaml"), "1" if strict else "0"],
                          capture_output=True, text=True, env={"PYTHONPATH": str(ROOT)}, timeout=120)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert done.stdout.startswith("operators/deep.yaml ")
    assert f"nested more than {yamlio.MAX_DEPTH} levels deep" in done.stdout


def test_depth_just_under_the_limit_loads_and_over_it_is_refused():
    ok = "[" * yamlio.MAX_DEPTH + "]" * yamlio.MAX_DEPTH
    assert yamlio.load_all(ok, "ok.yaml")
    deep = "a: " + "[" * yamlio.MAX_DEPTH + "]" * yamlio.MAX_DEPTH  # the mapping is one level more
    with pytest.raises(InputError, match="nested more than"):
        yamlio.load_all(deep, "deep.yaml")


def test_a_json_stream_is_bounded_document_by_document():
    """Many shallow documents pass however many brackets they hold together; one deep document among them
    is refused wherever it stands."""
    shallow = [{"schema": "olm.bundle", "properties": [{"type": "t", "value": {"a": [1, {"b": [2]}]}}]}] * 200
    stream = "\n".join(json.dumps(d) for d in shallow)
    assert len(yamlio.load_all(stream, "many.json")) == 200
    deep = "[" * (yamlio.MAX_DEPTH + 1) + "]" * (yamlio.MAX_DEPTH + 1)
    for at in (0, 100, 200):
        docs = [json.dumps(d) for d in shallow]
        docs.insert(at, deep)
        with pytest.raises(InputError, match="nested more than"):
            yamlio.load_all("\n".join(docs), "deep.json")


def test_deep_nesting_through_aliases_is_refused():
    levels = ["a0: &a0 [[[[[[[[[[1]]]]]]]]]]"] + [f"a{i}: &a{i} [[[[[[[[[[*a{i - 1}]]]]]]]]]]" for i in range(1, 14)]
    with pytest.raises(InputError, match="nested more than"):
        yamlio.load_all("\n".join(levels) + "\n", "aliases.yaml")


def test_a_large_scalar_aliased_many_times_is_refused_before_expansion():
    text = "big: &big " + "x" * 4_000_000 + "\nrefs: [" + ", ".join(["*big"] * 300) + "]\n"
    with pytest.raises(InputError, match="alias bomb"):
        yamlio.load_all(text, "bomb.yaml")


def test_a_few_aliases_of_a_modest_scalar_still_load():
    text = "big: &big " + "x" * 10_000 + "\nrefs: [" + ", ".join(["*big"] * 50) + "]\n"
    assert len(yamlio.load_one(text, "ok.yaml")["refs"]) == 50


def test_only_regular_files_are_read(tmp_path):
    import os

    os.mkfifo(tmp_path / "pipe.yaml")
    with pytest.raises(InputError, match=r"not a regular file \(a FIFO\)"):
        yamlio.read_text(tmp_path / "pipe.yaml", "pipe.yaml")
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    with pytest.raises(InputError, match=r"not a regular file \(a character device\)"):
        yamlio.read_text(tmp_path / "zero.yaml", "zero.yaml")


def test_a_small_file_is_read_without_allocating_the_size_limit(tmp_path):
    """Reading the limit's worth at once made every file cost a 64 MB buffer, however small it was."""
    import tracemalloc

    (tmp_path / "small.yaml").write_text("a: 1\n" * 1000)
    tracemalloc.start()
    try:
        assert yamlio.read_text(tmp_path / "small.yaml", "small.yaml") == "a: 1\n" * 1000
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak


def test_a_file_that_grows_while_it_is_read_is_read_whole_up_to_the_limit(tmp_path, monkeypatch):
    import os

    path = tmp_path / "growing.yaml"
    path.write_text("a: 1\n")
    real = os.fstat

    def stale(fd):   # the size fstat saw, before the file grew
        info = real(fd)
        return os.stat_result((*info[:6], 2, *info[7:]))
    monkeypatch.setattr(os, "fstat", stale)
    assert yamlio.read_text(path, "growing.yaml") == "a: 1\n"
    monkeypatch.setattr(codec, "MAX_FILE_BYTES", 3)
    with pytest.raises(InputError, match="over the 3-byte limit"):
        yamlio.read_text(path, "growing.yaml")


def test_strict_loading_names_the_duplicate_key_and_both_lines():
    text = "a: 1\nspec:\n  channel: stable\n  other: x\n  channel: fast\n"
    assert yamlio.load_one(text, "lenient.yaml") == {"a": 1, "spec": {"channel": "fast", "other": "x"}}
    with pytest.raises(InputError) as err:
        yamlio.load_one(text, "strict.yaml", strict=True)
    assert err.value.message == "duplicate key 'channel' (line 5); it is first set on line 3"
    with pytest.raises(InputError, match="duplicate key 'a'"):
        yamlio.load_all('{"a": 1, "a": 2}', "strict.json", strict=True)
    # merge keys are not duplicates
    assert yamlio.load_one("base: &b {x: 1}\nm:\n  <<: *b\n  y: 2\n", "merge.yaml", strict=True)["m"] == {"x": 1, "y": 2}



def test_json_strings_must_be_unicode_and_numbers_finite():
    """A lone surrogate cannot be written as UTF-8 anywhere later; 1e999999 would be read as infinity."""
    with pytest.raises(InputError) as err:
        yamlio.load_all('{"a": "x"}\n{"b": [1,\n "\\udc00 \\ud800"]}', "c.json")
    assert err.value.message == "invalid JSON: a string holds an unpaired UTF-16 surrogate (line 3: \\udc00)"
    # a pair is one character, and an escaped backslash is no escape
    assert yamlio.load_one('{"a": "\\ud83d\\ude00", "b": "\\\\ud800"}', "c.json") == {"a": "\U0001f600",
                                                                                  "b": "\\ud800"}
    with pytest.raises(InputError, match="the number -1e999999 is too large for a float"):
        yamlio.load_one('{"a": -1e999999}', "c.json")
    assert yamlio.load_one('{"a": 1.5e308}', "c.json") == {"a": 1.5e308}


def test_an_error_names_a_hostile_file_on_one_line_a_terminal_shows_as_is():
    name = "operators/a\x1b[2J\u202e\udcff\nerror: forged.yaml"   # clear screen, right-to-left, byte ff
    err = InputError("declared twice", path=name, obj="Operator x",
                     hint=f"also declared in {name}\n  and in b.yaml")
    assert err.render() == ("operators/a\\x1b[2J\\u202e\\xff\\nerror: forged.yaml: Operator x: declared twice\n"
                            "  hint: also declared in operators/a\\x1b[2J\\u202e\\xff\\nerror: forged.yaml\n"
                            "  and in b.yaml")
    assert InputError("plain: caf\u00e9 \u2713", path="ok.yaml").render() == "ok.yaml: plain: caf\u00e9 \u2713"
    long = InputError(f"unknown field spec.{'k' * 1_000_000}", path="big.json").render()
    assert long == f"big.json: unknown field spec.{'k' * 1981}...(996019 characters)...{'k' * 2000}"

def _secret(**data: str) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "n"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def test_secret_diffs_print_a_fixed_mask_and_whether_the_value_changed():
    live = _secret(password="hunter2", user="admin", old="x")
    proposed = _secret(password="correct horse", user="admin", token="t0ken")
    lines = describe_diff(live, proposed)
    text = "\n".join(lines)
    assert "data.password: <redacted> -> <redacted, changed>" in lines
    assert "data.token: added <redacted>" in lines
    assert "data.old: removed" in lines
    assert not any(line.startswith("data.user") for line in lines)  # unchanged values are not listed
    for value in ("hunter2", "correct horse", "t0ken", "admin"):
        encoded = base64.b64encode(value.encode()).decode()
        for secret in (value, encoded):
            assert secret not in text
            assert hashlib.sha256(secret.encode()).hexdigest()[:8] not in text
    assert "sha256" not in text


def test_shape_errors_name_the_json_path():
    shape = Obj({"spec": Obj({"items": ListOf(Obj({"port": INT, "labels": MapOf(STR)}))})}, required=("spec",))
    check({"spec": {"items": [{"port": 1}, {"port": 2, "labels": {"a": "b"}}]}}, shape)
    for doc, message in [
        ({}, "spec: is required"),
        ({"spec": []}, "spec: must be a mapping, not a list"),
        ({"spec": {"items": {"port": 1}}}, "spec.items: must be a list, not a mapping"),
        ({"spec": {"items": [{"port": 1}, {"port": "80"}]}}, "spec.items[1].port: must be an integer, not a string"),
        ({"spec": {"items": [{"port": True}]}}, "spec.items[0].port: must be an integer, not a boolean"),
        ({"spec": {"items": [{"labels": {"a": 1}}]}}, "spec.items[0].labels.a: must be a string, not a number"),
    ]:
        with pytest.raises(InputError) as err:
            check(doc, shape, path="f.yaml", obj="Thing x")
        assert err.value.message == message
        assert err.value.render().startswith("f.yaml: Thing x: ")


def test_every_exit_code_an_error_can_carry_is_documented_in_help():
    from reconciler import errors
    from reconciler.commands import EXIT_CODES

    documented = {int(line.split()[0]) for line in EXIT_CODES.splitlines()
                  if line.startswith("  ") and not line.startswith("   ") and line.split()[0].isdigit()}
    assert documented == {0, 1, 2, 3, 4, 5, 64, 70, 141}

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    carried = {cls.exit_code for cls in subclasses(errors.ReconcilerError)}
    assert carried <= documented and {2, 3, 64, 70} <= carried


def test_secret_data_that_is_not_base64_names_the_key_and_never_the_value():
    from reconciler.bundle import shapes
    from reconciler.errors import BundleError

    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
              "data": {"ok": "aGVsbG8=", "wrapped": "aGVs\nbG8=\n", "empty": "", "token": "hunter2!"}}
    with pytest.raises(BundleError) as caught:
        shapes.check_manifest(secret, "manifests/creds.yaml", "file://bundles/x")
    assert "data.token: is not base64" in caught.value.message and "hunter2" not in caught.value.render()
    assert caught.value.exit_code == 2 and caught.value.path == "manifests/creds.yaml"
    del secret["data"]["token"]
    shapes.check_manifest(secret, "manifests/creds.yaml", "file://bundles/x")   # line breaks are ignored
