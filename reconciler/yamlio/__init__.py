"""The one place YAML and JSON are parsed and written (``codec``), with the bounds hostile input is held to
(``bounds``) and PyYAML's loader and dumper classes (``classes``), imported on the first YAML text."""

from __future__ import annotations

from reconciler.yamlio.codec import (
    MAX_DEPTH, MAX_FILE_BYTES, dump, dump_all, dump_json, dump_readable, dump_record, import_pyyaml, load_all,
    load_one, read_all, read_text, write_atomic,
)

__all__ = ["MAX_DEPTH", "MAX_FILE_BYTES", "dump", "dump_all", "dump_json", "dump_readable", "dump_record",
           "import_pyyaml", "load_all", "load_one", "read_all", "read_text", "write_atomic"]
