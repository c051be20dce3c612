"""reconciler.yamlio: the one YAML/JSON reader and writer."""

from __future__ import annotations

import pytest

from reconciler import yamlio
from reconciler.yamlio import codec
from reconciler.errors import InputError
from tests.support.paths import CORPUS, ROOT
from tests.support.parts import not_tested


def test_timestamps_stay_strings():
    docs = yamlio.load_all("created: 2019-09-16T22:26:29Z\nday: 2024-01-31\nquoted: '2024-01-31'\n", "t.yaml")
    assert docs == [{"created": "2019-09-16T22:26:29Z", "day": "2024-01-31", "quoted": "2024-01-31"}]


def test_other_scalars_keep_their_types():
    doc = yamlio.load_one("i: 3\nf: 1.5\nb: true\nn: null\ns: text\n", "t.yaml")
    assert doc == {"i": 3, "f": 1.5, "b": True, "n": None, "s": "text"}


def test_last_duplicate_key_wins():
    text = "spec:\n  version: '2.0.0'\n  version: '>2.0.0 <3.0.0'\n  channel: a\n  channel: b\n"
    assert yamlio.load_one(text, "dup.yaml") == {"spec": {"version": ">2.0.0 <3.0.0", "channel": "b"}}


def test_multi_document_stream_drops_empty_documents():
    text = "---\na: 1\n---\n---\n# only a comment\n---\nb: 2\n...\n"
    assert yamlio.load_all(text, "multi.yaml") == [{"a": 1}, {"b": 2}]


def test_json_stream_of_concatenated_objects():
    text = '{"schema": "olm.package", "name": "a"}\n{"schema": "olm.channel",\n "name": "stable"}  {"x": [1, 2]}\n'
    assert yamlio.load_all(text, "catalog.json") == [
        {"schema": "olm.package", "name": "a"}, {"schema": "olm.channel", "name": "stable"}, {"x": [1, 2]}]


def test_json_document_with_duplicate_keys_last_wins():
    assert yamlio.load_all('{"a": 1, "a": 2}', "d.json") == [{"a": 2}]


def test_flow_yaml_that_is_not_json_falls_back_to_yaml():
    assert yamlio.load_all("{a: 1, b: [x, y]}\n", "flow.yaml") == [{"a": 1, "b": ["x", "y"]}]


def test_invalid_yaml_names_file_and_line():
    text = "apiVersion: v1\nkind: Operator\nmetadata:\n  name: [unclosed\n  other: x\n"
    with pytest.raises(InputError) as err:
        yamlio.load_all(text, "operators/broken.yaml")
    rendered = err.value.render()
    assert err.value.path == "operators/broken.yaml"
    assert rendered.startswith("operators/broken.yaml: invalid YAML (line ")
    assert "line 5" in rendered or "line 6" in rendered
    assert "hint: the '[' at line 4, column 9 is not closed where the next entry begins" in rendered


def test_invalid_yaml_bad_indentation_line_number():
    with pytest.raises(InputError) as err:
        yamlio.load_all("a: 1\nb: 2\n  c: 3\n", "x.yaml")
    assert "(line 3, column" in err.value.message


def test_load_one_rejects_several_documents():
    with pytest.raises(InputError, match="expected exactly one YAML document, found 2") as err:
        yamlio.load_one("a: 1\n---\nb: 2\n", "settings.yaml")
    assert err.value.path == "settings.yaml"


def _billion_laughs(levels: int = 9, width: int = 9) -> str:
    text = "l0: &l0 [" + ", ".join(['"lol"'] * width) + "]\n"
    for i in range(1, levels + 1):
        text += f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]\n"
    return text


def test_billion_laughs_is_refused():
    # Only 81 aliases, but 9**10 nodes once expanded: a consumer that walks
    # or re-serialises the result would never finish.
    with pytest.raises(InputError) as err:
        yamlio.load_all(_billion_laughs(), "bomb.yaml")
    assert err.value.path == "bomb.yaml"
    assert "alias" in err.value.message and "bomb" in err.value.message


def test_markdown_bullets_beside_an_anchor_are_not_mistaken_for_aliases():
    # Real catalogs carry long markdown descriptions ("* item") and sometimes an anchor.
    bullets = "\n".join(f"  * feature {i}" for i in range(3000))
    text = f"base: &base {{k: v}}\ncopy: *base\ndescription: |\n{bullets}\n"
    [doc] = yamlio.load_all(text, "catalog.yaml")
    assert doc["copy"] == {"k": "v"} and doc["description"].count("* feature") == 3000


def test_many_aliases_of_a_small_node_load():
    text = "a: &a x\nb: [" + ", ".join(["*a"] * 5000) + "]\n"
    [doc] = yamlio.load_all(text, "aliases.yaml")
    assert doc["b"] == ["x"] * 5000


def test_self_referencing_alias_is_refused():
    with pytest.raises(InputError, match="alias") as err:
        yamlio.load_all("a: &a [1, *a]\n", "cycle.yaml")
    assert err.value.path == "cycle.yaml"


def test_modest_anchor_reuse_is_accepted():
    text = ("defaults: &defaults {cpu: 10m, memory: 64Mi}\n"
            "a: *defaults\nb: *defaults\nc: {<<: *defaults, cpu: 20m}\n")
    doc = yamlio.load_one(text, "anchors.yaml")
    assert doc["a"] == doc["b"] == {"cpu": "10m", "memory": "64Mi"}
    assert doc["c"] == {"cpu": "20m", "memory": "64Mi"}


def test_oversized_text_is_refused(monkeypatch):
    monkeypatch.setattr(codec, "MAX_FILE_BYTES", 100)
    assert yamlio.load_all("a: " + "x" * 90, "small.yaml") == [{"a": "x" * 90}]
    with pytest.raises(InputError, match="larger than 100 bytes") as err:
        yamlio.load_all("a: " + "x" * 100, "big.yaml")
    assert err.value.path == "big.yaml"


def test_oversized_file_is_refused_before_reading(tmp_path, monkeypatch):
    monkeypatch.setattr(codec, "MAX_FILE_BYTES", 100)
    path = tmp_path / "big.yaml"
    path.write_text("a: " + "x" * 200)
    with pytest.raises(InputError, match="over the 100-byte limit") as err:
        yamlio.read_all(path, "catalogs/big.yaml")
    assert err.value.path == "catalogs/big.yaml"


def test_read_all_reports_display_name(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("a: [\n")
    with pytest.raises(InputError) as err:
        yamlio.read_all(path, "operators/x.yaml")
    assert err.value.render().startswith("operators/x.yaml: invalid YAML (line 2")


def test_read_all_missing_file_and_non_utf8(tmp_path):
    with pytest.raises(InputError, match="cannot read file") as err:
        yamlio.read_all(tmp_path / "missing.yaml", "missing.yaml")
    assert err.value.path == "missing.yaml"
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(InputError, match="not UTF-8") as err:
        yamlio.read_all(bad, "latin1.yaml")
    assert err.value.path == "latin1.yaml"


def test_dump_is_deterministic_across_insertion_order():
    a = {"kind": "Lock", "apiVersion": "v1", "bundles": [{"z": 1, "a": {"y": 2, "b": 3}}]}
    b = {"bundles": [{"a": {"b": 3, "y": 2}, "z": 1}], "apiVersion": "v1", "kind": "Lock"}
    assert yamlio.dump(a).encode() == yamlio.dump(b).encode()
    # 'y' is quoted: Go's YAML decoder (opm, kubectl) would read a plain y as the boolean true
    assert yamlio.dump(a) == "apiVersion: v1\nbundles:\n- a:\n    b: 3\n    'y': 2\n  z: 1\nkind: Lock\n"


@pytest.mark.parametrize(("text", "go", "plain"), [
    ("y", True, "y"), ("Y", True, "Y"), ("n", False, "n"), ("N", False, "N"), ("yes", True, True),
    ("1e5", 100000.0, "1e5"), ("12e03", 12000.0, "12e03"), ("1.e3", 1000.0, "1.e3"), ("09", 9.0, "09"),
    ("0o17", 15, "0o17"), ("017", 15, 15), ("1_000", 1000, 1000), ("0b101", 5, 5), ("-0x1F", -31, -31),
    ("1:20", "1:20", 80), (".5", 0.5, 0.5), ("1.2.3", "1.2.3", "1.2.3"), ("~", None, None), ("2001-12-14",) * 3,
])
def test_go_scalars_read_plain_scalars_as_opm_does(text, go, plain):
    """Catalogs are read with Go's YAML 1.1 resolution (yaml.v2, what opm and kubectl use; each value here was
    checked against opm v1.61.0's render); other content keeps PyYAML's."""
    assert yamlio.load_one(f"v: {text}\n", "c.yaml", go=True) == {"v": go}
    assert yamlio.load_one(f"v: {text}\n", "c.yaml") == {"v": plain}
    assert yamlio.load_one(yamlio.dump({"v": text}), "c.yaml", go=True) == {"v": text}   # written quoted


def test_dump_writes_no_aliases_and_round_trips():
    shared = {"k": "v"}
    obj = {"a": shared, "b": shared, "when": "2019-09-16T22:26:29Z", "name": "caf\u00e9"}
    text = yamlio.dump(obj)
    assert "&" not in text and "*" not in text
    assert "caf\u00e9" in text
    assert yamlio.load_one(text, "rt.yaml") == obj


def test_dump_json_is_sorted_and_newline_terminated():
    assert yamlio.dump_json({"b": 1, "a": [2]}) == '{\n  "a": [\n    2\n  ],\n  "b": 1\n}\n'


def test_dump_all_round_trips_documents():
    docs = [{"kind": "A", "x": 1}, {"kind": "B"}]
    assert yamlio.load_all(yamlio.dump_all(docs), "all.yaml") == docs


def test_a_plain_equals_sign_is_text():
    # YAML 1.1 reads a bare "=" as its "value" type, which the safe loader cannot construct.
    [doc] = yamlio.load_all("operator: =\nargs: [--level, =, x]\n", "csv.yaml")
    assert doc == {"operator": "=", "args": ["--level", "=", "x"]}


_GENERAL_CASES = [
    "i: 3\nhex: 0x1f\noct: 0o17\nsexa: 1:30\nneg: -4_000\nf: 1.5e3\ninf: .inf\nnan_key: ~\nb: [yes, No, on, OFF]\n",
    "quoted: ['3', \"true\", 'null']\nempty: ''\nplain-empty:\nexplicit: !!str 12\nint: !!int '7'\n",
    "created: 2019-09-16T22:26:29Z\neq: =\n",
    "a: &x {k: [1, 2]}\nb: *x\nc: [*x, *x]\n1: one\n2.5: two-and-a-half\nnull: n\ntrue: t\n",
    "---\n- a\n- - b\n  - {c: d, e: [f, {g: h}]}\n...\n---\n---\nlast: |\n  block\n  text\nfolded: >-\n  a\n  b\n",
    "k: v\nk: w\nnested: {x: 1, x: 2}\n",
    # plain scalars met again are read from a per-text memo: the same values as the first time
    "r: [1, 1, yes, yes, 0x1f, 0x1f, 2019-09-16, 2019-09-16, ~, ~, x, x, '1', 1]\n1: [1, yes]\nyes: {1: 1}\n",
]


@pytest.mark.parametrize("text", _GENERAL_CASES)
def test_the_event_builder_builds_what_the_composer_and_constructor_build(text):
    import yaml

    built, _ = codec._build(text, "t.yaml")
    assert [d for d in built if d is not None] == [d for d in yaml.load_all(text, Loader=codec._Loader)
                                                   if d is not None]


@pytest.mark.parametrize("text", [
    "base: &b {x: 1, y: 2}\nderived:\n  <<: *b\n  y: 3\n",   # merge key
    "s: !!set {a, b}\n",                                     # an explicit collection tag
    "? [a, b]\n: c\n",                                       # a list as a key
    "a: &x 1\nb: &x 2\n",                                    # the same anchor twice
])
def test_unusual_content_takes_the_general_path(text):
    import yaml

    with pytest.raises(codec._Unusual):
        codec._build(text, "t.yaml")
    try:
        expected = [d for d in yaml.load_all(text, Loader=codec._Loader) if d is not None]
    except yaml.YAMLError:
        with pytest.raises(InputError):
            yamlio.load_all(text, "t.yaml")
    else:
        assert yamlio.load_all(text, "t.yaml") == expected


@pytest.mark.parametrize("text, made", [
    ("a: 1\nbin: !!binary aGk=\n", "!!binary makes bytes"),
    ("when: !!timestamp 2024-01-31\n", "!!timestamp makes a date and time"),
    ("s: !!set {a, b}\n", "!!set makes a set"),
    ("o: !!omap [a: 1]\n", "!!omap makes ordered pairs"),
    ("p: !!pairs [a: 1]\n", "!!pairs makes pairs"),
    ("? !!timestamp 2024-01-31\n: key\n", "!!timestamp makes"),
])
def test_tags_whose_values_json_cannot_hold_are_refused_where_they_are_read(text, made):
    """Bytes, sets, pairs and datetimes would fail only where the content is written as JSON (a request)."""
    for strict in (False, True):
        with pytest.raises(InputError, match=f"invalid YAML \\(line .*\\): the tag {made}") as err:
            yamlio.load_all(text, "t.yaml", strict=strict)
        assert err.value.path == "t.yaml"
    assert yamlio.load_one("created: 2019-09-16T22:26:29Z\nbin: aGk=\n", "t.yaml") == {
        "created": "2019-09-16T22:26:29Z", "bin": "aGk="}


def test_the_event_builder_stops_at_the_depth_limit_with_the_line():
    text = "a: 1\nb:\n  c: " + "[" * 200 + "]" * 200 + "\n"
    with pytest.raises(InputError, match=r"nested more than 128 levels deep \(line 3\)"):
        codec._build(text, "deep.yaml")


def test_the_event_builder_matches_the_constructor_on_real_catalogs():
    import yaml

    corpus = CORPUS / "catalogs"
    files = sorted(corpus.glob("v4.*/*/catalog.yaml"))[:8]
    if not files:
        not_tested("corpus", "the shared corpus is absent")
    for path in files:
        text = path.read_text()
        built, _ = codec._build(text, str(path))
        assert [d for d in built if d is not None] == [d for d in yaml.load_all(text, Loader=codec._Loader)
                                                       if d is not None], path


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("text", ["n: " + "9" * 5000 + "\n", "{\"n\": " + "9" * 5000 + "}"])
def test_a_number_too_long_to_read_is_an_input_error_on_every_path(text, strict):
    with pytest.raises(InputError, match="a number of 5000 digits") as caught:
        yamlio.load_all(text, "catalog.yaml", strict=strict)
    assert caught.value.path == "catalog.yaml"


def test_json_is_read_without_importing_pyyaml(tmp_path):
    """PyYAML is imported on the first YAML text only: a JSON catalog's load never pays for it."""
    import json
    import os
    import subprocess
    import sys

    (tmp_path / "foo").mkdir()
    blobs = [{"schema": "olm.package", "name": "foo", "defaultChannel": "stable"},
             {"schema": "olm.channel", "package": "foo", "name": "stable", "entries": [{"name": "foo.v1.0.0"}]},
             {"schema": "olm.bundle", "package": "foo", "name": "foo.v1.0.0", "image": "quay.io/example/foo:v1",
              "properties": [{"type": "olm.package", "value": {"packageName": "foo", "version": "1.0.0"}}]}]
    (tmp_path / "foo" / "catalog.json").write_text("\n".join(json.dumps(b) for b in blobs))
    child = ("import sys\nfrom reconciler.catalog import load\nr = load(sys.argv[1], use_cache=False)\n"
             "print(len(r.catalog.bundles), not r.errors, 'yaml' in sys.modules)\n"
             "from reconciler import yamlio\nyamlio.load_all('a: 1', 'x.yaml')\nprint('yaml' in sys.modules)\n")
    root = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", child, str(tmp_path)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": root}, check=True)
    assert proc.stdout.split() == ["1", "True", "False", "True"]


@pytest.mark.parametrize("source, text, message, hint", [
    ("catalog.json", '{"schema": "olm.package",\n "name": "a"\n{"schema": "olm.channel"}\n',
     "catalog.json: invalid JSON (line 3, column 1): Expecting ',' delimiter", "fix the JSON syntax there"),
    ("catalog.json", '{"schema": "olm.package"}\n{"schema": }\n',
     "catalog.json: invalid JSON (line 2, column 12): Expecting value", "fix the JSON syntax there"),
    ("op.yaml", "spec:\n\tcatalog: {}\n", "op.yaml: invalid YAML (line 2, column 1)",
     "YAML indents with spaces, never tabs: replace the tab on line 2 with spaces"),
    ("class.yaml", "constraints:\n- type: minKubeVersion\n  value: >= 1.20\n", "class.yaml: invalid YAML (line 3",
     "a value that starts with '>' begins a block scalar; quote it: \">= 1.20\""),
    ("bundle.yaml", "metadata:\n  annotations:\n    olm.properties: -|\n     {\"olm.gvk\": {\"group\": \"g\"}}\n",
     "bundle.yaml: invalid YAML (line 4", "'-|' is not a block scalar indicator; write '|-'"),
])
def test_a_syntax_error_is_named_in_the_files_language_with_what_to_write(source, text, message, hint):
    with pytest.raises(InputError) as err:
        yamlio.load_all(text, source, strict=True)
    assert message in err.value.render() and hint in err.value.hint
