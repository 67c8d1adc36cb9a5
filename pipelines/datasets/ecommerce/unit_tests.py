"""Unit tests of the e-commerce tables' functions (`tributary test`): rows in, the rows each must return."""

from __future__ import annotations

import pipelines.authoring as tb

INGESTED = "2026-11-02 12:00:00"

tb.test(
    "silver.events",
    name="types and currencies are normalized, an event without a user is quarantined",
    given={
        "bronze.events": [
            {
                "event_id": "e1",
                "event_type": " Order ",
                "event_time": "2026-11-02 10:00:00",
                "user_id": "u1",
                "product_id": "p1",
                "category": "books",
                "quantity": 2,
                "amount": "25.00",
                "currency": " usd ",
                "_ingested_at": INGESTED,
            },
            {
                "event_id": "e2",
                "event_type": "PAGE_VIEW",
                "event_time": "2026-11-01 23:59:59",
                "user_id": "u2",
                "_ingested_at": INGESTED,
            },
            {
                "event_id": "e3",
                "event_type": "page_view",
                "event_time": "2026-11-02 11:00:00",
                "user_id": None,
                "_ingested_at": INGESTED,
            },
        ]
    },
    expect=[
        {"event_id": "e1", "event_type": "order", "currency": "USD", "amount": "25.00", "event_date": "2026-11-02"},
        {"event_id": "e2", "event_type": "page_view", "currency": None, "amount": None, "event_date": "2026-11-01"},
    ],
    quarantined=[{"event_id": "e3", "reasons": ["user_id_present"]}],
)

tb.test(
    "silver.events",
    name="an order without a price, a year-9999 time and a malformed line are quarantined by name",
    given={
        "bronze.events": [
            {
                "event_id": "e4",
                "event_type": "order",
                "event_time": "2026-11-02 10:00:00",
                "user_id": "u1",
                "quantity": 1,
                "currency": "USD",
                "_ingested_at": INGESTED,
            },
            {
                "event_id": "e5",
                "event_type": "page_view",
                "event_time": "9999-01-01 00:00:00",
                "user_id": "u1",
                "_ingested_at": INGESTED,
            },
            {"_corrupt_record": '{"event_id": "e6", "event_t', "_ingested_at": INGESTED},
        ]
    },
    expect=[],
    quarantined=[
        {"event_id": "e4", "reasons": ["order_is_priced"]},
        {"event_id": "e5", "reasons": ["event_time_plausible"]},
        {
            "event_id": None,
            "reasons": [
                "event_id_present",
                "event_time_present",
                "event_type_known",
                "order_is_priced",
                "user_id_present",
                "well_formed",
            ],
        },
    ],
)

tb.test(
    "gold.daily_revenue",
    name="orders, units and revenue per day, category and currency; other events are not revenue",
    given={
        "silver.events": [
            {
                "event_type": "order",
                "event_date": "2026-11-02",
                "category": "books",
                "currency": "USD",
                "quantity": 2,
                "amount": "25.00",
            },
            {
                "event_type": "order",
                "event_date": "2026-11-02",
                "category": "books",
                "currency": "USD",
                "quantity": 1,
                "amount": "12.50",
            },
            {
                "event_type": "order",
                "event_date": "2026-11-02",
                "category": "books",
                "currency": "EUR",
                "quantity": 1,
                "amount": "9.99",
            },
            {
                "event_type": "add_to_cart",
                "event_date": "2026-11-02",
                "category": "books",
                "currency": "USD",
                "quantity": 5,
                "amount": "99.00",
            },
        ]
    },
    expect=[
        {
            "event_date": "2026-11-02",
            "category": "books",
            "currency": "USD",
            "orders": 2,
            "units": 3,
            "revenue": "37.50",
        },
        {
            "event_date": "2026-11-02",
            "category": "books",
            "currency": "EUR",
            "orders": 1,
            "units": 1,
            "revenue": "9.99",
        },
    ],
)

tb.test(
    "gold.event_counts_5m",
    name="events per type in 5-minute windows",
    given={
        "silver.events": [
            {"event_type": "click", "event_time": "2026-11-02 10:00:00"},
            {"event_type": "click", "event_time": "2026-11-02 10:04:59"},
            {"event_type": "click", "event_time": "2026-11-02 10:05:00"},
            {"event_type": "order", "event_time": "2026-11-02 10:01:00"},
        ]
    },
    expect=[
        {
            "window_start": "2026-11-02 10:00:00",
            "window_end": "2026-11-02 10:05:00",
            "event_type": "click",
            "events": 2,
        },
        {
            "window_start": "2026-11-02 10:05:00",
            "window_end": "2026-11-02 10:10:00",
            "event_type": "click",
            "events": 1,
        },
        {
            "window_start": "2026-11-02 10:00:00",
            "window_end": "2026-11-02 10:05:00",
            "event_type": "order",
            "events": 1,
        },
    ],
)
