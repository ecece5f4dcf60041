"""Builds the optional C hot path of the client (infer_prof/loadgen/_stamped.c).

Everything else is configured in pyproject.toml. The extension is optional: where it cannot be
compiled (no C compiler, not Linux) the install goes on and the client uses its pure-Python
reader, which gives the same numbers at lower stream counts (see `infer-prof calibrate`).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "infer_prof.loadgen._stamped",
            sources=["infer_prof/loadgen/_stamped.c"],
            extra_compile_args=["-O2", "-Wall"],
            optional=True,
        )
    ]
)
