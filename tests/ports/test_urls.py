"""reactor.ports.urls.UrlOptions: typed URL options whose errors name the option, the bad value
and the URL with its credentials hidden (docs/protocol.md, "Adapter toolkit")."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from reactor.errors import ConfigurationError
from reactor.ports.urls import UrlOptions

PASSWORD = "s3cret-pw"
URL = f"test://user:{PASSWORD}@host:1/0"
LABEL = "Test URL option"


def options(**values: str) -> UrlOptions:
    return UrlOptions(values, url=URL, label=LABEL)


def message(excinfo: pytest.ExceptionInfo[ConfigurationError]) -> str:
    text = str(excinfo.value)
    assert PASSWORD not in text
    return text


# -- numbers ---------------------------------------------------------------------------------


def test_a_number_reads_its_value_or_the_default() -> None:
    opts = options(a="2.5", blank="", spaced=" 1.5 ", grouped="1_000", arabic="\u0661")
    assert opts.number("a", 9.0) == 2.5
    assert opts.number("absent", 9.0) == 9.0
    assert opts.number("blank", 9.0) == 9.0
    assert opts.number("spaced", 9.0) == 1.5
    assert opts.number("grouped", 9.0) == 1000.0
    assert opts.number("arabic", 9.0) == 1.0  # non-ASCII digits read as Python reads them


def test_minus_zero_reads_as_zero() -> None:
    value = options(a="-0").number("a", 5.0, minimum=0)
    assert value == 0.0
    assert math.copysign(1.0, value) == 1.0


@pytest.mark.parametrize(
    ("raw", "requirement"),
    [
        ("abc", "must be a number"),
        ("0x10", "must be a number"),
        ("\u00bd", "must be a number"),  # the vulgar fraction one half
        ("1,5", "must be a number"),
        ("nan", "must be a finite number"),
        ("NaN", "must be a finite number"),
        ("inf", "must be a finite number"),
        ("-Infinity", "must be a finite number"),
        ("1e999", "must be a finite number"),
        ("9" * 400, "must be a finite number"),
    ],
)
def test_a_bad_number_names_the_option_the_value_and_the_url(raw: str, requirement: str) -> None:
    with pytest.raises(ConfigurationError) as excinfo:
        options(timeout=raw).number("timeout", 1.0)
    text = message(excinfo)
    assert text.startswith(f"{LABEL} timeout=")
    assert requirement in text
    assert "'test://user:***@host:1/0'" in text
    if len(raw) <= 80:
        assert f"timeout={raw!r}" in text


def test_an_empty_number_is_refused_when_empty_is_not_allowed() -> None:
    with pytest.raises(ConfigurationError) as excinfo:
        options(timeout="").number("timeout", 1.0, allow_empty=False)
    assert "timeout='' must be a number" in message(excinfo)


@pytest.mark.parametrize(
    ("raw", "bounds", "requirement"),
    [
        ("0", {"exclusive_minimum": 0}, "must be > 0 seconds"),
        ("-0", {"exclusive_minimum": 0}, "must be > 0 seconds"),
        ("-1e-300", {"minimum": 0}, "must be >= 0 seconds"),
        ("0.5", {"minimum": 1}, "must be >= 1 seconds"),
        ("43200.5", {"maximum": 43200}, "must be <= 43200 seconds"),
        ("0", {"exclusive_minimum": 0, "maximum": 43200}, "must be > 0 and <= 43200 seconds"),
        ("1", {"minimum": 1.25}, "must be >= 1.25 seconds"),
    ],
)
def test_a_number_out_of_bounds_names_the_bounds(
    raw: str, bounds: dict[str, float], requirement: str
) -> None:
    with pytest.raises(ConfigurationError) as excinfo:
        options(t=raw).number("t", 1.0, unit="seconds", **bounds)
    assert f"t={raw!r} {requirement} (in " in message(excinfo)


def test_bounds_are_inclusive_except_the_exclusive_minimum() -> None:
    opts = options(low="1", high="43200", tiny="5e-324")
    assert opts.number("low", 0.0, minimum=1) == 1.0
    assert opts.number("high", 0.0, maximum=43200) == 43200.0
    assert opts.number("tiny", 1.0, exclusive_minimum=0) == 5e-324
    assert opts.number("absent", -7.0, minimum=0) == -7.0  # the default is never checked


# -- integers --------------------------------------------------------------------------------


def test_an_integer_reads_its_value_or_the_default() -> None:
    opts = options(a="7", plus="+5", zero="-0", blank="")
    assert opts.integer("a", 0) == 7
    assert opts.integer("plus", 0) == 5
    assert opts.integer("zero", 3, minimum=0) == 0
    assert opts.integer("blank", 3) == 3
    assert opts.integer("absent", 3) == 3


@pytest.mark.parametrize("raw", ["2.0", "1e3", "seven", "0x1", "", "9" * 5000])
def test_a_non_integer_is_refused(raw: str) -> None:
    with pytest.raises(ConfigurationError) as excinfo:
        options(n=raw).integer("n", 0, allow_empty=False)
    text = message(excinfo)
    assert "must be an integer" in text
    assert len(text) < 600  # a huge value is cut, its length named
    if len(raw) > 80:
        assert f"({len(raw)} characters)" in text


def test_an_integer_below_its_minimum_is_refused() -> None:
    with pytest.raises(ConfigurationError) as excinfo:
        options(max_connections="0").integer("max_connections", 1, minimum=1)
    assert "max_connections='0' must be >= 1 (in " in message(excinfo)


# -- booleans, choices, text -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("1", True), ("true", True), ("YES", True), ("On", True),
     ("0", False), ("FALSE", False), ("no", False), ("off", False)],
)  # fmt: skip
def test_a_boolean_reads_the_usual_words_in_any_case(raw: str, expected: bool) -> None:
    assert options(flag=raw).boolean("flag", not expected) is expected


@pytest.mark.parametrize("raw", ["maybe", "2", "tru", "\u0131", " true"])
def test_any_other_boolean_is_refused(raw: str) -> None:
    with pytest.raises(ConfigurationError) as excinfo:
        options(flag=raw).boolean("flag", True)
    assert f"flag={raw!r} must be true or false" in message(excinfo)


def test_an_empty_boolean_is_the_default_unless_refused() -> None:
    assert options(flag="").boolean("flag", True) is True
    with pytest.raises(ConfigurationError, match="must be true or false"):
        options(flag="").boolean("flag", True, allow_empty=False)


def test_a_choice_is_one_of_its_words() -> None:
    opts = options(clock="application", reqs="REQUIRED")
    assert opts.choice("clock", "server", ("server", "application")) == "application"
    assert opts.choice("absent", "server", ("server", "application")) == "server"
    assert opts.choice("reqs", "none", ("none", "required"), ignore_case=True) == "required"
    with pytest.raises(ConfigurationError) as excinfo:
        opts.choice("reqs", "none", ("none", "optional", "required"))
    assert "reqs='REQUIRED' must be 'none', 'optional' or 'required'" in message(excinfo)


def test_an_empty_choice_is_refused_when_empty_is_not_allowed() -> None:
    with pytest.raises(ConfigurationError, match="clock='' must be 'server' or 'application'"):
        options(clock="").choice("clock", "server", ("server", "application"), allow_empty=False)


def test_text_is_returned_as_given() -> None:
    opts = options(name="caf\u00e9 \u2603", blank="")
    assert opts.text("name", "x") == "caf\u00e9 \u2603"
    assert opts.text("blank", "x") == ""
    assert opts.text("absent", "x") == "x"
    with pytest.raises(ConfigurationError) as excinfo:
        opts.text("blank", "x", allow_empty=False)
    assert "blank='' must not be empty" in message(excinfo)


# -- secrets never reach a message -----------------------------------------------------------


def test_an_option_named_like_a_secret_shows_no_value() -> None:
    opts = UrlOptions(
        {"api_token": "hunter2hunter2"}, url="test://h/?api_token=hunter2hunter2", label=LABEL
    )
    with pytest.raises(ConfigurationError) as excinfo:
        opts.integer("api_token", 0)
    text = str(excinfo.value)
    assert "hunter2" not in text
    assert "api_token=*** must be an integer" in text
    assert "'api_token': '***'" in repr(opts) and "hunter2" not in repr(opts)


def test_a_value_carrying_credentials_is_redacted() -> None:
    raw = "http://admin:pa55word@host:1"
    opts = UrlOptions({"endpoint_url": raw}, url=f"test://t?endpoint_url={raw}", label=LABEL)
    error = opts.invalid("endpoint_url", "must be an http(s)://host[:port] URL")
    assert isinstance(error, ConfigurationError)
    assert "pa55word" not in str(error)
    assert "endpoint_url='http://admin:***@host:1' must be" in str(error)


def test_a_huge_url_is_cut_in_messages() -> None:
    url = f"test://user:{PASSWORD}@host/0?t={'x' * 100_000}"
    with pytest.raises(ConfigurationError) as excinfo:
        UrlOptions({"t": "x" * 100_000}, url=url, label=LABEL).number("t", 1.0)
    text = message(excinfo)
    assert len(text) < 1000
    assert "(100000 characters)" in text


@given(st.text(min_size=1))
def test_no_value_of_a_secret_option_reaches_a_message(value: str) -> None:
    try:
        float(value)
    except ValueError:
        pass
    else:
        assume(False)  # a number is accepted: nothing to report
    opts = UrlOptions({"password": value}, url="test://host/0", label=LABEL)
    with pytest.raises(ConfigurationError) as excinfo:
        opts.number("password", 1.0)
    assert str(excinfo.value) == f"{LABEL} password=*** must be a number (in 'test://host/0')"


def test_without_a_url_the_message_names_no_url() -> None:
    with pytest.raises(ConfigurationError) as excinfo:
        UrlOptions({"n": "x"}).integer("n", 0)
    assert str(excinfo.value) == "URL option n='x' must be an integer"


# -- parsing a query -------------------------------------------------------------------------


def test_parse_keeps_blank_values_decodes_and_lets_the_last_repeat_win() -> None:
    opts = UrlOptions.parse("a=1&b=&c=x%20y&a=2", url=URL)
    assert opts == {"a": "2", "b": "", "c": "x y"}
    assert len(opts) == 3 and list(opts) == ["a", "b", "c"] and "b" in opts


def test_parse_refuses_every_unknown_option_and_lists_the_accepted_ones() -> None:
    with pytest.raises(ConfigurationError) as excinfo:
        UrlOptions.parse(
            "prefix=p&bogus=1&colour=red&bogus=2", url=f"{URL}?bogus=1", label=LABEL,
            accepted={"prefix", "queue"},
        )
    text = message(excinfo)
    assert text.startswith(f"unknown {LABEL}s 'bogus', 'colour' in 'test://user:***@host:1/0")
    assert text.endswith("(accepted: prefix, queue)")


def test_parse_refuses_a_repeat_when_asked() -> None:
    with pytest.raises(ConfigurationError) as excinfo:
        UrlOptions.parse("region=a&region=b", url=URL, label=LABEL, repeated=False)
    assert f"{LABEL} 'region' is given twice in 'test://user:***@host:1/0'" == message(excinfo)
    assert UrlOptions.parse("region=a&prefix=b", url=URL, repeated=False) == {
        "region": "a", "prefix": "b"
    }  # fmt: skip


def test_the_options_hold_no_password() -> None:
    opts = UrlOptions.parse("a=1", url=URL)
    assert opts.redacted_url == "test://user:***@host:1/0"
    assert PASSWORD not in repr(opts)
    assert all(PASSWORD not in str(getattr(opts, slot)) for slot in UrlOptions.__slots__)


def test_an_integer_default_of_a_number_comes_back_as_a_float() -> None:
    value = options().number("absent", 3)
    assert type(value) is float and value.is_integer()


def test_an_empty_secret_option_is_shown_empty() -> None:
    with pytest.raises(ConfigurationError) as excinfo:
        options(ssl_keyfile="").text("ssl_keyfile", "", allow_empty=False)
    assert "ssl_keyfile='' must not be empty" in message(excinfo)
