"""The e-commerce demo: a JSON event stream refined bronze → silver → gold (`tables`), and its generator."""
