"""The clickstream demo: impressions, clicks, a product catalog and a change feed (`tables`), and its generator."""
