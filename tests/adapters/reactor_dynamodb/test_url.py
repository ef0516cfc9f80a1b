"""DynamoDB/SQS URLs: options validated at construction, bounded failure when unreachable."""

from __future__ import annotations

import socket
import sys
import time

import pytest
from reactor_dynamodb._aws import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_MAX_ATTEMPTS,
    make_client,
    parse_url,
)

from reactor.config import router_from_url, storage_from_url
from reactor.errors import ConfigurationError, RouterError, StorageError


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("dynamodb://?region=us-east-1", "names no table"),
        ("dynamodb://ab?region=us-east-1", "invalid DynamoDB table name"),
        ("dynamodb://tbl?region=us-east-1&bogus=1", "'bogus'"),
        ("dynamodb://tbl?region=us-east-1&visibility_timeout=3", "'visibility_timeout'"),
        ("dynamodb://tbl?region=us-east-1&region=eu-west-1", "twice"),
        ("dynamodb://tbl?region=us%20east", "region"),
        ("dynamodb://tbl?region=-bad-", "region"),
        ("dynamodb://tbl?region=us-east-1&endpoint_url=127.0.0.1:5000", "endpoint_url"),
        ("dynamodb://tbl?region=us-east-1&endpoint_url=http://127.0.0.1:abc", "endpoint_url"),
        ("dynamodb://tbl?region=us-east-1&endpoint_url=http://:80", "endpoint_url"),
        ("dynamodb://tbl?region=us-east-1&connect_timeout=-1", "connect_timeout"),
        ("dynamodb://tbl?region=us-east-1&read_timeout=0", "read_timeout"),
        ("dynamodb://tbl?region=us-east-1&read_timeout=inf", "read_timeout"),
        ("dynamodb://tbl?region=us-east-1&max_attempts=0", "max_attempts"),
        ("dynamodb://tbl?region=us-east-1&max_attempts=2.5", "max_attempts"),
        ("dynamodb://tbl?region=us-east-1&create=perhaps", "create"),
        ("dynamodb://tbl?region=us-east-1&clock_skew_budget=-1", "clock_skew_budget"),
        ("sqs://?region=us-east-1", "names no queue"),
        ("sqs://q?region=us-east-1&clock_skew_budget=1", "'clock_skew_budget'"),
        ("sqs://q?region=us-east-1&visibility_timeout=-1", "visibility_timeout"),
        ("sqs://q?region=us-east-1&visibility_timeout=99999", "visibility_timeout"),
    ],
)
def test_bad_urls_are_configuration_errors_naming_the_problem(url: str, named: str) -> None:
    factory = storage_from_url if url.startswith("dynamodb") else router_from_url
    with pytest.raises(ConfigurationError, match=named):
        factory(url)


def test_the_documented_options_are_accepted() -> None:
    parsed = parse_url(
        "sqs://jobs?region=eu-west-1&endpoint_url=http://127.0.0.1:5000&prefix=t-1"
        "&create=false&max_attempts=5&connect_timeout=1&read_timeout=25&visibility_timeout=1",
        "sqs",
    )
    assert parsed.region == "eu-west-1"
    assert parsed.options["prefix"] == "t-1"


def test_client_timeouts_and_retries_are_bounded_by_default() -> None:
    client = make_client("dynamodb", parse_url("dynamodb://tbl?region=us-east-1", "dynamodb"))
    try:
        config = client.meta.config
        assert config.connect_timeout == DEFAULT_CONNECT_TIMEOUT
        assert config.read_timeout == 10.0
        assert config.retries["total_max_attempts"] == DEFAULT_MAX_ATTEMPTS
    finally:
        client.close()
    sqs = make_client("sqs", parse_url("sqs://q?region=us-east-1&read_timeout=40", "sqs"))
    try:
        assert sqs.meta.config.read_timeout == 40.0  # the URL wins
    finally:
        sqs.close()


def test_an_sqs_client_waits_30_seconds_for_a_reply_by_default() -> None:
    """The documented SQS default (docs/adapters/dynamodb.md, the options table): a reply may
    take as long as a 20 s long poll, so SQS reads wait 30 s unless ``read_timeout`` says
    otherwise."""
    sqs = make_client("sqs", parse_url("sqs://q?region=us-east-1", "sqs"))
    try:
        assert sqs.meta.config.read_timeout == 30.0
    finally:
        sqs.close()


def test_no_region_anywhere_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    import reactor_dynamodb._aws as aws

    monkeypatch.setattr(aws, "_session", None)  # a fresh session reads the patched chain
    with pytest.raises(ConfigurationError, match="region"):
        storage_from_url("dynamodb://tbl")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once the socket is closed


def test_an_unreachable_endpoint_fails_in_bounded_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    with pytest.raises(StorageError):
        storage_from_url(f"dynamodb://tbl?region=us-east-1&endpoint_url={endpoint}")
    with pytest.raises(RouterError):
        router_from_url(f"sqs://jobs?region=us-east-1&endpoint_url={endpoint}")
    assert time.monotonic() - started < 15.0


def test_a_bad_option_value_names_the_url_and_hides_credentials() -> None:
    with pytest.raises(ConfigurationError) as excinfo:
        parse_url("dynamodb://tbl?region=us-east-1&read_timeout=-2", "dynamodb")
    assert str(excinfo.value) == (
        "dynamodb:// URL option read_timeout='-2' must be > 0 seconds "
        "(in 'dynamodb://tbl?region=us-east-1&read_timeout=-2')"
    )
    with pytest.raises(ConfigurationError) as excinfo:
        parse_url("sqs://q?region=us-east-1&endpoint_url=http://u:hunter2@127.0.0.1:abc", "sqs")
    assert "hunter2" not in str(excinfo.value)
    assert "endpoint_url='http://u:***@127.0.0.1:abc' is malformed" in str(excinfo.value)


def test_whole_numbers_written_as_floats_stay_valid_attempt_counts() -> None:
    assert parse_url("sqs://q?region=us-east-1&max_attempts=2.0", "sqs").max_attempts == 2
    assert parse_url("sqs://q?region=us-east-1", "sqs").max_attempts == DEFAULT_MAX_ATTEMPTS


def test_without_boto3_a_client_is_a_configuration_error_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "boto3", None)  # what ``import boto3`` meets uninstalled
    with pytest.raises(ConfigurationError, match=r"pip install 'reactor-saga\[dynamodb\]'"):
        make_client("sqs", parse_url("sqs://q?region=us-east-1", "sqs"))
