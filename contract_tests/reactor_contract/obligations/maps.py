"""Obligations of the maps concern (docs/obligations.md; docs/contract-suite.md, "The
obligation catalogue")."""

from __future__ import annotations

from reactor_contract.obligations import Obligation

_MAPS = 'docs/protocol.md, "Maps"'
_CONVENTIONS = 'docs/protocol.md, "Conventions"'
_FAST = 'docs/protocol.md, "Optional fast paths"'
_RACE = (
    "8 threads released together by a barrier (every racer spinning until all are awake) with "
    "the thread switch interval cut to 1 µs, on a fresh map each round, at least 20 rounds and "
    "up to 300 within a 1 s budget (reactor_contract.test_concurrency.race_rounds)"
)

OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        "O-maps-1",
        "init(metadata) of a new map returns True and stores the metadata: metadata(map_id) "
        "reads back an equal MapMetadata, every field (extra included) intact.",
        _MAPS,
    ),
    Obligation(
        "O-maps-2",
        "init(metadata) sets the map's counter to metadata.count in the same write: counter() "
        "reads metadata.count right after it.",
        _MAPS,
    ),
    Obligation(
        "O-maps-3",
        "init(metadata) of a map that exists returns False and changes nothing: neither the "
        "stored metadata nor the counter.",
        _MAPS,
    ),
    Obligation(
        "O-maps-4",
        "metadata(map_id) and counter(map_id) of an unknown map return None.",
        _MAPS,
    ),
    Obligation(
        "O-maps-5",
        "add_to_counter(map_id, delta) adds delta (which may be negative) and returns the new "
        "value as an int; counter() then reads that value.",
        _MAPS,
    ),
    Obligation(
        "O-maps-6",
        "add_to_counter is atomic: concurrent calls lose no update (200 decrements of a "
        "counter of 200 by racing threads return each of 199..0 once and leave it at 0).",
        _MAPS,
        checked="probabilistic",
        how=_RACE + "; each racer decrements 25 times",
    ),
    Obligation(
        "O-maps-7",
        "init_offset(map_id, value) sets the dispatch offset only if it was never set, and "
        "returns True only for the call that set it; offset() is None until then and reads the "
        "first value after.",
        _MAPS,
    ),
    Obligation(
        "O-maps-8",
        "advance_offset(map_id, amount) adds amount to the offset and returns the new value as "
        "an int; the offset may grow past the map's count.",
        _MAPS,
    ),
    Obligation(
        "O-maps-9",
        "advance_offset is atomic: concurrent callers get distinct new values, so the batches "
        "[new - amount, new) they own never overlap.",
        _MAPS,
        checked="probabilistic",
        how=_RACE + "; each racer advances the offset by 2 once",
    ),
    Obligation(
        "O-maps-10",
        "set_failed_context(map_id, context_id) is first writer wins: True for the first call, "
        "False for every later one; failed_context() reads the first id, None before any.",
        _MAPS,
    ),
    Obligation(
        "O-maps-11",
        "claim_owner_signal(map_id) returns True to exactly one caller ever and False to every "
        "later call.",
        _MAPS,
    ),
    Obligation(
        "O-maps-12",
        "claim_owner_signal is atomic: of concurrent callers exactly one gets True.",
        _MAPS,
        checked="probabilistic",
        how=_RACE,
    ),
    Obligation(
        "O-maps-13",
        "Every claim_owner_signal call takes the map out of scan for good: later writes to the "
        "map (its counter, its slots) never list it again, and its metadata stays readable.",
        _MAPS,
    ),
    Obligation(
        "O-maps-14",
        "scan() lists the metadata of every active map (from init until the owner signal is "
        "claimed), never a map-rollback record, and at most limit rows a page.",
        _MAPS,
    ),
    Obligation(
        "O-maps-15",
        "The map scan is keyset paged: following next_cursor until None lists every active "
        "map exactly once, even when the row a cursor was taken after leaves the scan.",
        _CONVENTIONS,
    ),
    Obligation(
        "O-maps-16",
        "A malformed map-scan cursor raises ValueError.",
        _CONVENTIONS,
    ),
    Obligation(
        "O-maps-17",
        "put_result(map_id, index, value) stores the codec text verbatim in slot index; "
        "storing an index twice overwrites the slot (it still counts once).",
        _MAPS,
    ),
    Obligation(
        "O-maps-18",
        "results_page(map_id, offset=, limit=) returns the present slots among the indexes "
        "offset .. offset + limit - 1 as (index, value) pairs in numeric index order ([] when "
        "none).",
        _MAPS,
    ),
    Obligation(
        "O-maps-19",
        "result_slots(map_id, indexes) returns the slots aligned with indexes, None where a "
        "slot is missing ([] for no indexes).",
        _MAPS,
    ),
    Obligation(
        "O-maps-20",
        "count_results(map_id) returns how many slots are present, and missing_indices(map_id, "
        "count) the ascending indexes of [0, count) without a slot: the slots, not the "
        "counter, decide completion.",
        _MAPS,
    ),
    Obligation(
        "O-maps-21",
        "Maps share nothing: one map's slots are never read through another map id.",
        _MAPS,
    ),
    Obligation(
        "O-maps-22",
        "append_element(map_id, context_id) returns the 0-based position of the new entry; "
        "positions never shift, and the same id appended twice is kept twice.",
        _MAPS,
    ),
    Obligation(
        "O-maps-23",
        "append_element is atomic: concurrent appends never share a position, and every one "
        "is counted by count_elements.",
        _MAPS,
        checked="probabilistic",
        how=_RACE + "; each racer appends 10 ids",
    ),
    Obligation(
        "O-maps-24",
        "element_ids(map_id, start=, limit=) returns the ids in append order from start (at "
        "most limit); count_elements returns how many were appended (0 for an unknown map).",
        _MAPS,
    ),
    Obligation(
        "O-maps-25",
        "element_id(map_id, position) returns the id at position, a negative position counting "
        "from the end, and None out of range.",
        _MAPS,
    ),
    Obligation(
        "O-maps-26",
        "element_ids_from_tail(map_id, position=, count=, total=) returns the ids at tail "
        "positions position .. position + count - 1 of the first total entries, newest first, "
        "unshifted by later appends, and [] once the positions run past the head.",
        _MAPS,
    ),
    Obligation(
        "O-maps-27",
        "Every map write (init, counter, offset, slot, element index, failed context, owner "
        "claim, the element fast paths) stamps what it writes with the context_ttl retention.",
        _CONVENTIONS,
    ),
    Obligation(
        "O-maps-28",
        "An aggregate never expires before what was written with it: the element index "
        "outlives its entries and the map outlives its parent context.",
        _CONVENTIONS,
    ),
    Obligation(
        "O-maps-29",
        "An expired map reads as absent: metadata, counter and offset None, no slots, not in "
        "scan, and init succeeds again.",
        _CONVENTIONS,
    ),
    Obligation(
        "O-maps-30",
        "begin_element(map_id, index, context_id) returns the metadata, whether slot index is "
        "settled and the failed element, and appends context_id (returning its position) only "
        "when an id is given, the map is known, the slot is absent and no element failed; it "
        "never changes the counter.",
        _FAST,
    ),
    Obligation(
        "O-maps-31",
        "settle_element(map_id, index, value, failed_context=) records the failed context "
        "(first wins) when given, stores the slot, decrements the counter by one and returns "
        "the counter.",
        _FAST,
    ),
    Obligation(
        "O-maps-32",
        "A map store's own BeginsAndSettlesElements methods return and write exactly what "
        "their composition of MapStore calls does, step for step.",
        _FAST,
    ),
    Obligation(
        "O-maps-33",
        "settle_releasing(map_id, index, value, failed_context=, fence=) settles the element "
        "as settle_element does, then releases the fence's lock only when the fence's owner "
        "holds it; another owner's lock stays held, its expiry unchanged.",
        _FAST,
    ),
    Obligation(
        "O-maps-34",
        "settle_releasing re-stamps the map's records only, never a lock's: the released lock "
        "keeps at most its fence retention and another owner's lock its own lifetime.",
        _FAST,
    ),
)
