"""Write the JSON Schemas of the result document, the sweep summary and the matrix summary for
the current schema version into the package (``infer_prof/results/schemas/``:
``result-v<N>.schema.json``, ``sweep-v<N>.schema.json``, ``matrix-v<N>.schema.json``), from their
one declaration each (``infer_prof/results/document.py``, ``sweep_document.py``,
``matrix_summary.py``). Run after changing those modules; a unit test fails while a shipped
file and its declaration differ.

    python scripts/write_result_schema.py
"""

from infer_prof.results.document import schema_path, schema_text
from infer_prof.results.matrix_summary import matrix_schema_path, matrix_schema_text
from infer_prof.results.schema import SCHEMA_VERSION
from infer_prof.results.sweep_document import sweep_schema_path, sweep_schema_text

if __name__ == "__main__":
    for path, text in ((schema_path(SCHEMA_VERSION), schema_text()),
                       (sweep_schema_path(SCHEMA_VERSION), sweep_schema_text()),
                       (matrix_schema_path(SCHEMA_VERSION), matrix_schema_text())):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        print(path)
