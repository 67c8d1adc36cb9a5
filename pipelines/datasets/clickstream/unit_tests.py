"""Unit tests of the clickstream tables' functions (`tributary test`): rows in, the rows each must return."""

from __future__ import annotations

import pipelines.authoring as tb

tb.test(
    "silver.impressions",
    name="impressions get their product's category (unknown without one); malformed and id-less rows are dropped",
    given={
        "bronze.impressions": [
            {
                "impression_id": "i1",
                "user_id": "u1",
                "product_id": "p1",
                "cost_cents": 5,
                "event_time": "2026-11-02 10:00:00",
            },
            {
                "impression_id": "i2",
                "user_id": "u1",
                "product_id": "p9",
                "cost_cents": 3,
                "event_time": "2026-11-02 10:01:00",
            },
            {"impression_id": None, "user_id": "u2", "product_id": "p1", "event_time": "2026-11-02 10:02:00"},
            {"impression_id": "i4", "_corrupt_record": "{not json", "event_time": "2026-11-02 10:03:00"},
        ],
        "silver.products": [{"product_id": "p1", "name": "Atlas", "category": "books", "price": "20.00"}],
    },
    expect=[
        {"impression_id": "i1", "category": "books", "cost_cents": 5},
        {"impression_id": "i2", "category": "unknown", "cost_cents": 3},
    ],
)

tb.test(
    "gold.ad_clicks",
    name="a click within 5 minutes after its impression is attributed; a later one is not",
    given={
        "silver.impressions": [
            {
                "impression_id": "i1",
                "user_id": "u1",
                "product_id": "p1",
                "category": "books",
                "event_time": "2026-11-02 10:00:00",
            },
        ],
        "bronze.clicks": [
            {"click_id": "c1", "impression_id": "i1", "user_id": "u1", "event_time": "2026-11-02 10:02:30"},
            {"click_id": "c2", "impression_id": "i1", "user_id": "u1", "event_time": "2026-11-02 10:06:00"},
        ],
    },
    expect=[{"click_id": "c1", "impression_id": "i1", "category": "books", "ms_to_click": 150000}],
)

tb.test(
    "gold.clicks_by_category",
    name="attributed clicks and their total time to click per category",
    given={
        "gold.ad_clicks": [
            {"click_id": "c1", "category": "books", "ms_to_click": 1000},
            {"click_id": "c2", "category": "books", "ms_to_click": 3000},
            {"click_id": "c3", "category": "toys", "ms_to_click": 500},
        ]
    },
    expect=[
        {"category": "books", "clicks": 2, "total_ms_to_click": 4000},
        {"category": "toys", "clicks": 1, "total_ms_to_click": 500},
    ],
)
