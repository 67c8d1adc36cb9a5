"""The clickstream demo: impressions, clicks, a product catalog and a change feed (`tables`, with the landed
records in `records` and the transforms in `transforms`), and its generator."""
