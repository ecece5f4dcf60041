"""Write the result document's JSON Schema for the current schema version into the package
(``infer_prof/results/schemas/result-v<N>.schema.json``), from its one declaration in
``infer_prof/results/document.py``. Run after changing that module; a unit test fails while the
shipped file and the declaration differ.

    python scripts/write_result_schema.py
"""

from infer_prof.results.document import schema_path, schema_text
from infer_prof.results.schema import SCHEMA_VERSION

if __name__ == "__main__":
    path = schema_path(SCHEMA_VERSION)
    path.parent.mkdir(exist_ok=True)
    path.write_text(schema_text())
    print(path)
