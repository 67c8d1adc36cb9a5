"""`tributary infer`: sample the files landed for a dataset and write their schema as code to paste into a spec.

`sample` chooses and reads the sample without Spark, `schema` infers the schema with Spark (`values` refines it
from the sampled values, `type_code` spells a type as code), and `code` renders the result as Python.
"""
