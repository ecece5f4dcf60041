"""The arithmetic of the catalogs' facts: GPUs, model architectures, prices, rented offers, and the
roofline they give. Pure; loading the catalogs lives in ``infer_prof.catalog``."""
