"""DynamoDocumentStore on moto's server: compare-and-set, logical expiry, scans, limits."""

from __future__ import annotations

import time
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from reactor_dynamodb import DYNAMO_CAPABILITIES, storage_from_url
from reactor_dynamodb.documents import GSI_NAME, MAX_ITEM_BYTES, DynamoDocumentStore

from reactor.errors import ContextTooLargeError, StorageError
from reactor.memory.clock import ManualClock

T0 = float(int(time.time()))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def store(dynamodb_client: Any, unique: str, clock: ManualClock) -> DynamoDocumentStore:
    documents = DynamoDocumentStore(dynamodb_client, f"docs-{unique}", prefix="p/", clock=clock)
    assert documents.ensure_table() is True
    return documents


def test_ensure_table_is_idempotent_and_sets_up_gsi_and_ttl(
    store: DynamoDocumentStore, dynamodb_client: Any
) -> None:
    assert store.ensure_table() is False
    table = dynamodb_client.describe_table(TableName=store.table)["Table"]
    assert [g["IndexName"] for g in table["GlobalSecondaryIndexes"]] == [GSI_NAME]
    ttl = dynamodb_client.describe_time_to_live(TableName=store.table)
    assert ttl["TimeToLiveDescription"]["AttributeName"] == "expires_at"


def test_compare_and_set(store: DynamoDocumentStore) -> None:
    assert store.write("c", "k", {"n": 1}, expected_version=None, expires_at=None)
    assert not store.write("c", "k", {"n": 9}, expected_version=None, expires_at=None)
    first = store.read("c", "k")
    assert store.write("c", "k", {"n": 2}, expected_version=first.version, expires_at=None)
    assert not store.write("c", "k", {"n": 3}, expected_version=first.version, expires_at=None)
    current = store.read("c", "k")
    assert current.value == {"n": 2}
    assert not store.write("c", "k", None, expected_version=first.version, expires_at=None)
    assert not store.write("c", "k", None, expected_version=None, expires_at=None)
    assert store.write("c", "k", None, expected_version=current.version, expires_at=None)
    assert store.read("c", "k").version is None


def test_logical_expiry_keeps_the_version(store: DynamoDocumentStore, clock: ManualClock) -> None:
    store.write("c", "k", {"n": 1}, expected_version=None, expires_at=T0 + 2.5)
    live = store.read("c", "k")
    assert live.expires_at == T0 + 2.5
    clock.advance(2.5)
    expired = store.read("c", "k")
    assert (expired.value, expired.version) == (None, live.version)
    assert store.scan("c") == []
    assert store.write("c", "k", {"n": 2}, expected_version=expired.version, expires_at=None)


def test_scans_are_key_ordered_indexed_and_paged(
    store: DynamoDocumentStore, clock: ManualClock
) -> None:
    for key in ["b", "a", "d", "c", "e"]:
        store.write("c", key, {"k": key}, expected_version=None, expires_at=None, index="x")
    store.write("c", "f", {"k": "f"}, expected_version=None, expires_at=None)
    store.write("c", "g", {"k": "g"}, expected_version=None, expires_at=T0 + 1, index="x")
    store.write("other", "a", {"k": "other"}, expected_version=None, expires_at=None, index="x")
    clock.advance(1)
    assert [k for k, _ in store.scan("c")] == ["a", "b", "c", "d", "e", "f"]
    assert [k for k, _ in store.scan("c", index="x", after="b", limit=2)] == ["c", "d"]
    assert [k for k, _ in store.scan("c", index="x", after="zz")] == []
    assert store.scan("c", limit=0) == []


def test_scan_fills_its_limit_past_expired_items(
    store: DynamoDocumentStore, clock: ManualClock
) -> None:
    for i in range(60):
        store.write("c", f"{i:03d}", {"i": i}, expected_version=None, expires_at=T0 + 1)
    store.write("c", "999", {"i": 999}, expected_version=None, expires_at=None)
    clock.advance(1)
    assert store.scan("c", limit=5) == [("999", {"i": 999})]


def test_a_scan_stops_at_its_limit_after_a_page_that_filled_it(store: DynamoDocumentStore) -> None:
    """A scan whose first page fills its limit, with more keys behind it, returns the limit:
    257 of 260 keys (a limit past the small integers Python shares, 256)."""
    for i in range(260):
        store.write("c", f"{i:03d}", {"i": i}, expected_version=None, expires_at=None)
    assert [k for k, _ in store.scan("c", limit=257)] == [f"{i:03d}" for i in range(257)]


def test_items_over_400_kb_are_refused_before_the_request(store: DynamoDocumentStore) -> None:
    with pytest.raises(ContextTooLargeError) as info:
        store.write("c", "big", {"blob": "x" * 410_000}, expected_version=None, expires_at=None)
    assert info.value.size_bytes > 400 * 1024
    assert store.raw("c", "big") is None


class _RecordingQueries:
    """Forwards to a real boto3 DynamoDB client and records the ``Query`` requests."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.queries: list[dict[str, Any]] = []

    def query(self, **request: Any) -> Any:
        self.queries.append(request)
        return self.client.query(**request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def test_a_scan_reads_the_table_consistently_and_the_index_as_dynamodb_allows(
    dynamodb_client: Any, unique: str, clock: ManualClock
) -> None:
    """A scan of a collection is a strongly consistent ``Query`` (the module docstring of
    ``reactor_dynamodb.documents``), so on AWS too it lists a write just made, as a read does;
    an indexed scan queries the GSI, which DynamoDB cannot read consistently (it refuses
    ``ConsistentRead`` there). moto is consistent whatever the request asks, so the request
    is what tells them apart."""
    recording = _RecordingQueries(dynamodb_client)
    store = DynamoDocumentStore(recording, f"docs-{unique}", clock=clock)
    assert store.ensure_table() is True
    store.write("c", "k", {"n": 1}, expected_version=None, expires_at=None, index="x")
    assert store.scan("c") == [("k", {"n": 1})]
    assert store.scan("c", index="x") == [("k", {"n": 1})]
    table, index = recording.queries
    assert table["ConsistentRead"] is True and "IndexName" not in table
    assert index["IndexName"] == GSI_NAME and "ConsistentRead" not in index


class _Puts:
    """A DynamoDB client stand-in that takes every ``PutItem`` (no size limit of its own)."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def put_item(self, **request: Any) -> None:
        self.items.append(request["Item"])


def test_a_value_over_the_stores_own_limit_is_refused_before_the_request() -> None:
    """``max_document_bytes`` bounds the encoded value: a value of exactly the limit is sent,
    one a byte longer refused before any request."""
    client = _Puts()
    store = DynamoDocumentStore(client, "t", max_document_bytes=100, clock=lambda: T0)
    fits = {"blob": "x" * (100 - len('{"blob":""}'))}
    assert store.write("c", "k", fits, expected_version=None, expires_at=None)
    with pytest.raises(ContextTooLargeError) as info:
        store.write("c", "k", {"blob": fits["blob"] + "x"}, expected_version=None,
                    expires_at=None)
    assert (info.value.limit_bytes, len(client.items)) == (100, 1)


def test_the_item_size_counts_names_and_values_and_a_number_as_21_bytes() -> None:
    """DynamoDB's 400 KB (409,600 bytes) counts the UTF-8 lengths of attribute names and
    values; the store counts a number as its worst case, 21 bytes. With the store's value
    limit out of the way, an item of exactly 409,600 bytes is sent and one a byte larger
    refused before any request."""
    client = _Puts()
    store = DynamoDocumentStore(client, "t", max_document_bytes=MAX_ITEM_BYTES, clock=lambda: T0)
    # names: pk sk value version expires_at (26); values: "c", "k", the version (32 hex), the
    # expiry (21), and the JSON text around the blob, {"blob":""} (11)
    fits = {"blob": "x" * (MAX_ITEM_BYTES - 26 - 1 - 1 - 32 - 21 - 11)}
    assert store.write("c", "k", fits, expected_version=None, expires_at=T0 + 60)
    with pytest.raises(ContextTooLargeError) as info:
        store.write("c", "k", {"blob": fits["blob"] + "x"}, expected_version=None,
                    expires_at=T0 + 60)
    assert (info.value.size_bytes, len(client.items)) == (MAX_ITEM_BYTES + 1, 1)


def test_backdoor_rewrites_expiry_in_place(store: DynamoDocumentStore, clock: ManualClock) -> None:
    store.write("c", "k", {"n": 1}, expected_version=None, expires_at=None, index="i")
    before = store.raw("c", "k")
    assert before is not None
    assert store.set_expiry("c", "k", T0)
    after = store.raw("c", "k")
    assert after is not None
    assert (after.version, after.expires_at, after.index) == (before.version, T0, "i")
    assert store.set_expiry("c", "k", None)
    assert store.read("c", "k").value == {"n": 1}
    assert not store.set_expiry("c", "missing", T0)


def test_missing_table_is_a_storage_error(dynamodb_client: Any, unique: str) -> None:
    documents = DynamoDocumentStore(dynamodb_client, f"absent-{unique}")
    with pytest.raises(StorageError):
        documents.read("c", "k")


def test_factory_creates_the_table_and_honours_create_false(moto_url: str, unique: str) -> None:
    base = f"dynamodb://t-{unique}?region=us-east-1&endpoint_url={moto_url}"
    with pytest.raises(StorageError):
        storage_from_url(
            f"dynamodb://n-{unique}?region=us-east-1&endpoint_url={moto_url}&create=false"
        )
    storage = storage_from_url(base + "&prefix=a/", context_ttl=60.0, visibility_timeout=1)
    try:
        assert storage.capabilities.clock == "application"
        assert storage.capabilities.signals is False
        assert storage.claims is not None
        assert storage.documents.table == f"t-{unique}"
    finally:
        storage.close()


def test_the_exported_capabilities_are_those_of_a_storage_with_the_defaults(
    moto_url: str, unique: str
) -> None:
    """``DYNAMO_CAPABILITIES`` says what a storage built from a URL that sets neither a
    document limit nor a ``clock_skew_budget`` declares, the application clock and the
    documented skew budget of 1 s among it."""
    storage = storage_from_url(f"dynamodb://caps-{unique}?region=us-east-1&endpoint_url={moto_url}")
    try:
        assert storage.capabilities == DYNAMO_CAPABILITIES
        assert (DYNAMO_CAPABILITIES.clock, DYNAMO_CAPABILITIES.clock_skew) == ("application", 1.0)
    finally:
        storage.close()


class _FailingClient:
    """A boto3 client stand-in whose every request fails the way botocore does."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __getattr__(self, operation: str) -> Any:
        def send(**_: Any) -> Any:
            raise self.error

        return send


def _conditional_failure() -> Exception:
    return ClientError(
        {"Error": {"Code": "ConditionalCheckFailedException", "Message": "no"}}, "UpdateItem"
    )


class _Closable:
    """A boto3 client stand-in that counts its ``close`` calls."""

    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_a_store_closes_only_a_client_it_owns_and_only_once() -> None:
    """``close`` leaves a client the caller lent open (the caller may share it) and closes one
    the store owns (a storage built from a URL) once, however often it is called."""
    lent, owned = _Closable(), _Closable()
    DynamoDocumentStore(lent, "t").close()
    store = DynamoDocumentStore(owned, "t", owns_client=True)
    store.close()
    store.close()
    assert (lent.closed, owned.closed) == (0, 1)


def test_driver_errors_are_storage_errors_naming_the_operation_with_the_cause_chained() -> None:
    error = EndpointConnectionError(endpoint_url="http://127.0.0.1:1")
    store = DynamoDocumentStore(_FailingClient(error), "t", clock=lambda: T0)
    for operation, call in [
        ("write c/k", lambda: store.write("c", "k", {}, expected_version=None, expires_at=None)),
        ("read c/k", lambda: store.read("c", "k")),
        ("scan of c", lambda: store.scan("c")),
        ("set_expiry c/k", lambda: store.set_expiry("c", "k", None)),  # was a raw BotoCoreError
    ]:
        with pytest.raises(StorageError, match=f"^DynamoDB {operation} failed: ") as excinfo:
            call()
        assert excinfo.value.__cause__ is error


def test_a_refused_request_is_a_storage_error_not_a_lost_race() -> None:
    """Only ``ConditionalCheckFailedException`` is a lost race: any other refusal of a
    conditional write (here no permission) is a :class:`StorageError`."""
    denied = ClientError(
        {"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}}, "PutItem"
    )
    store = DynamoDocumentStore(_FailingClient(denied), "t", clock=lambda: T0)
    with pytest.raises(StorageError, match="not authorized"):
        store.write("c", "k", {}, expected_version=None, expires_at=None)
    with pytest.raises(StorageError, match="not authorized"):
        store.set_expiry("c", "k", T0)


def test_a_scan_reads_pages_of_25_to_1000_items(dynamodb_client: Any, unique: str) -> None:
    """``Limit`` counts the items a page reads before the expiry filter drops the expired
    ones, so a scan asks for at least 25 (a small limit is not read one item per request)
    and at most 1,000."""
    recording = _RecordingQueries(dynamodb_client)
    store = DynamoDocumentStore(recording, f"docs-{unique}", clock=lambda: T0)
    store.ensure_table()
    store.write("c", "k", {"n": 1}, expected_version=None, expires_at=None)
    assert store.scan("c", limit=1) == store.scan("c", limit=5_000) == [("k", {"n": 1})]
    assert [q["Limit"] for q in recording.queries] == [25, 1_000]


def test_a_failed_condition_is_a_lost_race_not_an_error() -> None:
    store = DynamoDocumentStore(_FailingClient(_conditional_failure()), "t", clock=lambda: T0)
    assert store.write("c", "k", {}, expected_version="v1", expires_at=None) is False
    assert store.write("c", "k", None, expected_version="v1", expires_at=None) is False
    assert store.set_expiry("c", "k", T0) is False


class _CreateRefused:
    """A DynamoDB client on moto whose ``CreateTable`` fails with ``error``."""

    def __init__(self, client: Any, error: ClientError) -> None:
        self.client = client
        self.error = error

    def create_table(self, **_: Any) -> Any:
        raise self.error

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


def test_a_refused_create_table_is_a_storage_error_naming_the_refusal(
    dynamodb_client: Any, unique: str
) -> None:
    """Only ``ResourceInUseException`` means "it exists already": any other refusal (here no
    ``dynamodb:CreateTable`` permission) fails ``ensure_table`` (and so ``reactor dynamodb
    create-table``) at once, naming it, instead of going on to wait for a table that will
    never exist."""
    denied = ClientError(
        {"Error": {"Code": "AccessDeniedException", "Message": "not authorized"},
         "ResponseMetadata": {"RetryAttempts": 0}},
        "CreateTable",
    )
    store = DynamoDocumentStore(_CreateRefused(dynamodb_client, denied), f"denied-{unique}")
    failed = f"^DynamoDB create_table denied-{unique} failed: "
    with pytest.raises(StorageError, match=failed) as info:
        store.ensure_table(wait=False)
    assert info.value.__cause__ is denied


def test_a_table_another_process_just_created_is_not_claimed_without_a_retry(
    dynamodb_client: Any, unique: str
) -> None:
    """``ensure_table`` reports ``True`` only for a table this call created: a single attempt
    that meets ``ResourceInUseException`` found it made by someone else, however recently. A
    client whose errors carry no retry count (botocore's ``Stubber``, a wrapping client)
    made one attempt."""
    table = f"race-{unique}"
    DynamoDocumentStore(dynamodb_client, table).ensure_table(wait=False)  # the other process
    exists = ClientError(
        {"Error": {"Code": "ResourceInUseException", "Message": "Table already exists"}},
        "CreateTable",
    )
    store = DynamoDocumentStore(_CreateRefused(dynamodb_client, exists), table)
    assert store.ensure_table(wait=False) is False


def test_a_retried_create_counts_a_table_made_up_to_5_seconds_before_the_call_as_its_own(
    dynamodb_client: Any, unique: str
) -> None:
    """When botocore's retry of ``CreateTable`` meets the table, ``ensure_table`` judges by the
    table's creation time whether the lost first attempt made it: made after the call started,
    give or take ``CREATED_BY_RETRY_SLACK`` (5 s of clock difference between this process and
    DynamoDB). A table made 4.5 s before the call's start counts as this call's; one made
    5.5 s before does not."""
    table = f"slack-{unique}"
    DynamoDocumentStore(dynamodb_client, table).ensure_table(wait=False)
    made = dynamodb_client.describe_table(TableName=table)["Table"]["CreationDateTime"]
    reply: Any = {"Error": {"Code": "ResourceInUseException", "Message": "Table already exists"},
                  "ResponseMetadata": {"RetryAttempts": 1}}  # botocore's retry met the table
    retried = ClientError(reply, "CreateTable")
    for started, created in [(made.timestamp() + 4.5, True), (made.timestamp() + 5.5, False)]:
        store = DynamoDocumentStore(
            _CreateRefused(dynamodb_client, retried), table, clock=ManualClock(started)
        )
        assert store.ensure_table(wait=False) is created, started - made.timestamp()
