"""Generates the demo's committed dataset: ``data/inventory.json`` and ``data/orders.jsonl``.

The output is a pure function of :data:`SEED`, :data:`ORDER_COUNT` and the tables below, so
re-running the script reproduces the committed files byte for byte (``--check`` verifies that).

The orders are realistic web-shop orders (repeat customers, 1-4 distinct SKUs per order,
country-specific addresses and currencies, Decimal amounts as strings) in which a few percent
fail for the same reasons real orders do:

* **out of stock** — :data:`CATALOG` gives a few SKUs little stock, so later orders for them
  cannot be reserved;
* **card declined** — some orders pay with a card token the fake ledger declines
  (:data:`~examples.order_fulfilment.services.DECLINED_CARD_TOKENS`);
* **undeliverable address** — some parcels go to a postal code the fake carrier does not serve
  (:data:`~examples.order_fulfilment.services.UNDELIVERABLE_POSTAL_CODES`);
* **carrier outage** — orders whose sequence falls into
  :data:`~examples.order_fulfilment.services.CARRIER_OUTAGE_WINDOWS` meet a carrier that is
  down for every retry;
* **invalid order** — a stale cart still holds a discontinued SKU.

:data:`PLANTED` forces one order of each random failure kind into the first 150 orders, so a
test running only those still meets every failure reason.

Usage (from the repository root)::

    python -m examples.order_fulfilment.generate_orders          # (re)write the data files
    python -m examples.order_fulfilment.generate_orders --check  # exit 1 if they are stale
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

from .services import DATA_DIR, DECLINED_CARD_TOKENS, UNDELIVERABLE_POSTAL_CODES

__all__ = [
    "CATALOG",
    "ORDER_COUNT",
    "PLANTED",
    "SEED",
    "generate_orders",
    "main",
    "render_inventory",
    "render_orders",
]

#: The fixed seed of the generator's random number generator.
SEED = 20241104
#: How many orders the dataset holds.
ORDER_COUNT = 1200

#: ``(sku, name, EUR price, on_hand, popularity weight, discontinued)``. GBP and USD prices are
#: derived from the EUR price (see :func:`_price`). The low ``on_hand`` values are deliberate.
CATALOG: tuple[tuple[str, str, str, int, int, bool], ...] = (
    ("TEE-ORG-BLK-M", "Organic cotton tee, black, M", "24.90", 5000, 60, False),
    ("TEE-ORG-BLK-L", "Organic cotton tee, black, L", "24.90", 5000, 55, False),
    ("TEE-ORG-WHT-M", "Organic cotton tee, white, M", "24.90", 5000, 45, False),
    ("HOD-ZIP-NVY-L", "Zip hoodie, navy, L", "69.00", 3000, 25, False),
    ("SCK-MRN-3PK", "Merino socks, 3-pack", "19.50", 8000, 50, False),
    ("CAP-WOL-GRY", "Wool beanie, grey", "29.00", 3000, 20, False),
    ("MUG-STN-WHT", "Stoneware mug, white", "14.90", 6000, 40, False),
    ("MUG-STN-SGE", "Stoneware mug, sage", "14.90", 6000, 30, False),
    ("BTL-STL-750", "Steel bottle, 750 ml", "32.00", 4000, 35, False),
    ("NTB-A5-DOT", "Notebook A5, dotted", "12.50", 8000, 45, False),
    ("PEN-FNT-BLK", "Fountain pen, black", "45.00", 2000, 12, False),
    ("BAG-CNV-TOTE", "Canvas tote bag", "18.00", 6000, 38, False),
    ("BAG-LTH-BRF", "Leather briefcase", "189.00", 800, 6, False),
    ("LMP-ARC-BRS", "Arc floor lamp, brass", "249.00", 2, 3, False),
    ("KET-GSE-CPR", "Gooseneck kettle, copper", "89.00", 40, 12, False),
    ("CHR-EMS-OAK", "Eames-style chair, oak", "159.00", 24, 6, False),
    ("CDL-SOY-FIG", "Soy candle, fig", "22.00", 5000, 30, False),
    ("TWL-LIN-SND", "Linen towel, sand", "27.00", 4000, 18, False),
    ("PLN-CER-S", "Ceramic planter, small", "16.00", 5000, 22, False),
    ("MUG-ENM-BLU", "Enamel mug, blue (discontinued)", "11.00", 0, 0, True),
)

#: ``{sequence: kind}`` of failures forced into the first orders (see the module docstring).
PLANTED: dict[int, str] = {
    17: "declined", 43: "undeliverable", 88: "discontinued", 131: "oversold",
}
#: The SKU an ``"oversold"`` planted order asks too many units of, and how many.
OVERSOLD_LINE: tuple[str, int] = ("LMP-ARC-BRS", 3)

#: Probability that an (unplanted) order uses a declined card.
DECLINED_RATE = 0.015
#: Probability that an (unplanted) order ships to an undeliverable postal code.
UNDELIVERABLE_RATE = 0.009
#: Probability that an (unplanted) order still holds the discontinued SKU.
DISCONTINUED_RATE = 0.004

_FX = {"EUR": Decimal("1"), "GBP": Decimal("0.86"), "USD": Decimal("1.08")}
_SHIPPING_FEE = {"EUR": Decimal("4.90"), "GBP": Decimal("3.95"), "USD": Decimal("6.99")}
_FREE_SHIPPING_FROM = Decimal("60.00")
_CURRENCY_OF = {"GB": "GBP", "US": "USD"}
_COUNTRY_WEIGHTS = {"DE": 34, "FR": 15, "NL": 10, "ES": 8, "IT": 7, "GB": 16, "US": 10}

#: ``{country: [(city, postal-code format, lowest n, highest n)]}``: ``format(n, letters)``
#: gives a postal code in the country's own format.
_CITIES: dict[str, list[tuple[str, str, int, int]]] = {
    "DE": [("Berlin", "1{0:04d}", 115, 9999), ("Hamburg", "2{0:04d}", 95, 2149),
           ("München", "8{0:04d}", 331, 1929), ("Köln", "5{0:04d}", 667, 1149),
           ("Leipzig", "04{0:03d}", 103, 357)],
    "FR": [("Paris", "750{0:02d}", 1, 20), ("Lyon", "6900{0:d}", 1, 9),
           ("Bordeaux", "3300{0:d}", 0, 0), ("Lille", "59{0:03d}", 0, 800)],
    "NL": [("Amsterdam", "10{0:02d} {1}", 11, 99), ("Utrecht", "35{0:02d} {1}", 11, 85),
           ("Rotterdam", "30{0:02d} {1}", 11, 89)],
    "ES": [("Madrid", "280{0:02d}", 1, 55), ("Barcelona", "080{0:02d}", 1, 42),
           ("Valencia", "460{0:02d}", 1, 26)],
    "IT": [("Milano", "201{0:02d}", 21, 62), ("Roma", "001{0:02d}", 18, 99),
           ("Torino", "101{0:02d}", 21, 56)],
    "GB": [("London", "SW{0:d} {0:d}{1}", 1, 9), ("Manchester", "M{0:d} {0:d}{1}", 1, 9),
           ("Bristol", "BS{0:d} {0:d}{1}", 1, 9)],
    "US": [("New York", "100{0:02d}", 1, 40), ("Austin", "787{0:02d}", 1, 59),
           ("San Francisco", "941{0:02d}", 2, 34), ("Chicago", "606{0:02d}", 1, 61)],
}
_STREETS: dict[str, list[str]] = {
    "DE": ["Hauptstraße", "Gartenweg", "Schillerstraße", "Lindenallee", "Bahnhofstraße"],
    "FR": ["rue de la Paix", "avenue Victor Hugo", "rue Nationale", "boulevard Voltaire"],
    "NL": ["Keizersgracht", "Prinsengracht", "Dorpsstraat", "Kerkstraat"],
    "ES": ["Calle Mayor", "Gran Vía", "Calle del Sol", "Avenida de la Paz"],
    "IT": ["Via Roma", "Corso Italia", "Via Garibaldi", "Via Dante"],
    "GB": ["High Street", "Station Road", "Church Lane", "Victoria Road"],
    "US": ["Main Street", "Oak Avenue", "Maple Drive", "Park Place"],
}
_ISLAND_CITY = {"DE": "Helgoland", "GB": "Lerwick", "FR": "Gustavia"}
_FIRST = ["Anna", "Lukas", "Marie", "Jonas", "Sophie", "Élodie", "Hugo", "Chloé", "Sem",
          "Lotte", "Lucía", "Javier", "Giulia", "Marco", "Oliver", "Amelia", "Harry", "Isla",
          "Emma", "Noah", "Olivia", "Liam", "Mia", "Leon", "Zoë", "Mateo", "Freya", "Arjun"]
_LAST = ["Müller", "Schmidt", "Schneider", "Fischer", "Martin", "Bernard", "Dubois", "de Vries",
         "Jansen", "García", "Fernández", "Rossi", "Russo", "Smith", "Jones", "Taylor", "Brown",
         "Johnson", "Williams", "Nguyen", "Okafor", "Kowalski", "Novák", "O'Brien"]
_DOMAINS = ["example.com", "example.org", "example.net"]
_BRANDS = {"visa": 55, "mastercard": 35, "amex": 10}
_TOKEN_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_CENT = Decimal("0.01")


def _price(eur: str, currency: str) -> Decimal:
    """Returns the catalog price of an item in ``currency`` (EUR price times a fixed rate)."""
    return (Decimal(eur) * _FX[currency]).quantize(_CENT, rounding=ROUND_HALF_UP)


def render_inventory() -> str:
    """Returns the text of ``data/inventory.json`` (prices in all currencies, stock levels)."""
    skus: dict[str, Any] = {}
    for sku, name, eur, on_hand, _weight, discontinued in CATALOG:
        skus[sku] = {
            "name": name,
            "prices": {cur: str(_price(eur, cur)) for cur in _FX},
            "on_hand": on_hand,
            "discontinued": discontinued,
        }
    return json.dumps({"schema": 1, "skus": skus}, indent=2, ensure_ascii=False) + "\n"


def _ascii(text: str) -> str:
    """Lower-cases ``text`` and folds it to ``[a-z]`` for an e-mail local part."""
    folded = unicodedata.normalize("NFKD", text.lower())
    return "".join(ch for ch in folded if "a" <= ch <= "z")


def _customers(rng: random.Random, count: int) -> list[dict[str, Any]]:
    """Creates ``count`` customers, each with a home address and a card."""
    countries = list(_COUNTRY_WEIGHTS)
    weights = list(_COUNTRY_WEIGHTS.values())
    customers = []
    for n in range(count):
        first, last = rng.choice(_FIRST), rng.choice(_LAST)
        country = rng.choices(countries, weights)[0]
        customers.append({
            "customer": {
                "name": f"{first} {last}",
                "email": f"{_ascii(first)}.{_ascii(last)}{n}@{rng.choice(_DOMAINS)}",
            },
            "address": _address(rng, country),
            "payment": {
                "token": "tok_" + "".join(rng.choice(_TOKEN_ALPHABET) for _ in range(24)),
                "brand": rng.choices(list(_BRANDS), list(_BRANDS.values()))[0],
            },
        })
    return customers


def _address(rng: random.Random, country: str) -> dict[str, str]:
    """Returns a deliverable address in ``country``."""
    city, pattern, lowest, highest = rng.choice(_CITIES[country])
    letters = rng.choice("ABDEFHJLNPRSTUWXYZ") + rng.choice("ABDEFHJLNPRSTUWXYZ")
    return {
        "street": f"{rng.choice(_STREETS[country])} {rng.randint(1, 180)}",
        "city": city,
        "postal_code": pattern.format(rng.randint(lowest, highest), letters),
        "country": country,
    }


def _undeliverable_address(rng: random.Random) -> dict[str, str]:
    """Returns an address on an island the carrier does not serve."""
    country, postal_code = rng.choice(sorted(UNDELIVERABLE_POSTAL_CODES))
    return {
        "street": f"{rng.choice(_STREETS[country])} {rng.randint(1, 60)}",
        "city": _ISLAND_CITY[country],
        "postal_code": postal_code,
        "country": country,
    }


def _lines(
    rng: random.Random, currency: str, discontinued: bool, oversold: bool
) -> list[dict[str, str | int]]:
    """Picks 1-4 distinct SKUs with quantities.

    Args:
        rng: the generator.
        currency: the order currency (prices are in it).
        discontinued: append the discontinued SKU (a stale cart).
        oversold: append :data:`OVERSOLD_LINE` (more units than the warehouse ever had).

    Returns:
        JSON-ready line items.
    """
    sellable = [row for row in CATALOG if not row[5]]
    count = rng.choices([1, 2, 3, 4], [50, 30, 14, 6])[0]
    picked: list[tuple[str, str, str, int, int, bool]] = []
    while len(picked) < count:
        row = rng.choices(sellable, [r[4] for r in sellable])[0]
        if row not in picked:
            picked.append(row)
    if discontinued:
        picked.append(next(row for row in CATALOG if row[5]))
    quantities = [rng.choices([1, 2, 3, 5], [70, 20, 7, 3])[0] for _ in picked]
    if oversold:
        sku, quantity = OVERSOLD_LINE
        row = next(row for row in CATALOG if row[0] == sku)
        if row in picked:
            del quantities[picked.index(row)]
            picked.remove(row)
        picked.append(row)
        quantities.append(quantity)
    return [
        {"sku": row[0], "quantity": quantity, "unit_price": str(_price(row[2], currency))}
        for row, quantity in zip(picked, quantities, strict=True)
    ]


def generate_orders(count: int = ORDER_COUNT, seed: int = SEED) -> list[dict[str, Any]]:
    """Generates the orders as JSON-ready dicts (amounts are decimal strings).

    Args:
        count: how many orders (sequence numbers 1..count).
        seed: the random seed.

    Returns:
        The orders in sequence order.
    """
    rng = random.Random(seed)
    customers = _customers(rng, max(50, count * 3 // 8))
    declined_tokens = sorted(DECLINED_CARD_TOKENS)
    placed_at = datetime(2024, 11, 4, 7, 30, tzinfo=UTC)
    orders = []
    for seq in range(1, count + 1):
        placed_at += timedelta(seconds=rng.randint(20, 240))
        who = rng.choice(customers)
        planted = PLANTED.get(seq)
        declined = planted == "declined" or (planted is None and rng.random() < DECLINED_RATE)
        island = planted == "undeliverable" or (
            planted is None and rng.random() < UNDELIVERABLE_RATE)
        stale = planted == "discontinued" or (
            planted is None and rng.random() < DISCONTINUED_RATE)
        address = _undeliverable_address(rng) if island else who["address"]
        currency = _CURRENCY_OF.get(address["country"], "EUR")
        payment = dict(who["payment"])
        if declined:
            payment["token"] = rng.choice(declined_tokens)
        lines = _lines(rng, currency, stale, planted == "oversold")
        subtotal = sum((Decimal(str(ln["unit_price"])) * int(ln["quantity"]) for ln in lines),
                       Decimal("0.00"))
        fee = Decimal("0.00") if subtotal >= _FREE_SHIPPING_FROM else _SHIPPING_FEE[currency]
        orders.append({
            "id": f"ORD-{seq:06d}",
            "placed_at": placed_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "customer": who["customer"],
            "shipping_address": address,
            "lines": lines,
            "payment": payment,
            "currency": currency,
            "subtotal": str(subtotal),
            "shipping_fee": str(fee),
            "total": str(subtotal + fee),
        })
    return orders


def render_orders(orders: Sequence[dict[str, Any]]) -> str:
    """Returns the JSON Lines text of ``orders`` (one compact object per line)."""
    return "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in orders)


def main(argv: Sequence[str] | None = None) -> int:
    """Writes (or with ``--check`` verifies) the data files.

    Args:
        argv: command-line arguments (default ``sys.argv[1:]``).

    Returns:
        The exit code: 0, or 1 when ``--check`` finds a stale file.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="verify the committed files instead of writing them")
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="output directory")
    args = parser.parse_args(argv)
    files = {
        args.out / "inventory.json": render_inventory(),
        args.out / "orders.jsonl": render_orders(generate_orders()),
    }
    stale = False
    for path, text in files.items():
        if args.check:
            current = path.read_text(encoding="utf-8") if path.exists() else None
            if current != text:
                print(f"stale: {path}", file=sys.stderr)
                stale = True
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
