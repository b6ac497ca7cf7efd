"""The pure rules of the web view's guard and forms, without a server: Host names, session cookies, the
conf a trigger form makes, where signing in may send a browser, roles."""

from __future__ import annotations

import pytest

from ledger.core.errors import InvalidInput
from ledger.sdk.params import check_conf, from_description
from ledger.services.users import Role, allows
from ledger.web import auth, forms

PARAMS = {"who": {"default": "world", "type": ["string"]}, "n": {"default": 1, "type": ["integer"]},
          "mode": {"type": ["string"], "enum": ["full", "delta"]}, "any": {"default": None}}


@pytest.mark.parametrize(("header", "allowed"), [
    ("localhost:8793", True), ("127.0.0.1", True), ("[::1]:8793", True), ("LOCALHOST", True),
    ("attacker.example", False), ("attacker.example:8793", False), ("127.0.0.1.attacker.example", False),
    ("", False), (None, False)])
def test_only_loopback_names_are_answered_by_default(header: str | None, allowed: bool) -> None:
    assert auth.host_allowed(header, auth.allowed_hosts({})) is allowed


def test_allowed_hosts_come_from_the_variable_and_the_bound_address() -> None:
    hosts = auth.allowed_hosts({auth.HOSTS_VARIABLE: "Ledger.Example.org, 10.0.0.5"}, extra=("192.168.1.9",))
    assert hosts == {"ledger.example.org", "10.0.0.5", "192.168.1.9"}
    assert not auth.host_allowed("localhost", hosts)  # named hosts replace the loopback default
    assert auth.host_allowed("anything", auth.allowed_hosts({auth.HOSTS_VARIABLE: "*"}))


class User:
    """What a session check reads of a user row."""

    def __init__(self, password_hash: str) -> None:
        self.id, self.username, self.role, self.password_hash = 7, "ada", "operator", password_hash


def identify(signer: auth.Signer, cookie: str, user: User | None, now: float) -> auth.Identity | None:
    return signer.check(cookie, lambda user_id: user if user is not None and user_id == user.id else None, now=now)


def test_a_session_cookie_holds_while_signed_unexpired_and_its_user_unchanged() -> None:
    signer, user = auth.Signer("k" * 32), User("hash-1")
    cookie = signer.cookie(user.id, user.password_hash, now=1000.0)
    assert identify(signer, cookie, user, 1000.0 + 60) == auth.Identity("web:ada", "operator", by_cookie=True)
    assert identify(signer, cookie, user, 1000.0 + auth.SESSION_SECONDS + 1) is None  # expired
    assert identify(auth.Signer("other" * 8), cookie, user, 1060.0) is None  # another server's secret
    assert identify(signer, cookie, User("hash-2"), 1060.0) is None  # its password changed
    assert identify(signer, cookie, None, 1060.0) is None  # its user deleted
    forged = cookie.replace("7.", "8.", 1)
    assert identify(signer, forged, user, 1060.0) is None
    assert identify(signer, "garbage", user, 1060.0) is None


def test_a_signed_out_sessions_cookie_signs_nobody_in_and_only_its_digest_is_kept() -> None:
    signer, user = auth.Signer("k" * 32), User("hash-1")
    cookie, other = (signer.cookie(user.id, user.password_hash, now=1000.0) for _ in range(2))  # one second
    ended = {auth.cookie_digest(cookie)}
    assert cookie not in ended and all(len(d) == 64 for d in ended)
    lookup = lambda user_id: user  # noqa: E731
    assert signer.check(cookie, lookup, now=1060.0, ended=ended.__contains__) is None
    assert other != cookie and signer.check(other, lookup, now=1060.0, ended=ended.__contains__) is not None
    assert auth.expires_at(cookie) == 1000 + auth.SESSION_SECONDS


def test_a_trigger_form_gives_each_filled_param_its_type_and_leaves_the_rest_to_defaults() -> None:
    assert forms.conf_from_form(PARAMS, {"param.who": "", "param.n": ""}) is None
    assert forms.conf_from_form(PARAMS, {"param.who": "42", "param.n": "3", "param.mode": "delta"}) == \
        {"who": "42", "n": 3, "mode": "delta"}
    assert forms.conf_from_form(PARAMS, {"param.any": "[1, 2]", "conf": '{"extra": true}'}) == \
        {"any": [1, 2], "extra": True}
    with pytest.raises(InvalidInput, match="not valid JSON for a param of type integer"):
        forms.conf_from_form(PARAMS, {"param.n": "three"})
    with pytest.raises(InvalidInput, match="must be a JSON object"):
        forms.conf_from_form(PARAMS, {"conf": "[1]"})


@pytest.mark.parametrize(("typed", "value"), [
    ("20240301", "20240301"), ("true", "true"), ("[1]", "[1]"), ("abc", "abc"),  # JSON it does not take: the text
    ('"20240301"', "20240301"), ("null", None)])  # JSON it takes: that value
def test_a_param_that_takes_strings_keeps_the_text_whose_json_it_would_refuse(typed: str, value: object) -> None:
    """The optional string idiom, `type=["null", "string"]`: a batch id or a date stamp typed in the form is a
    string, not a number the param refuses."""
    params = {"batch": {"default": None, "type": ["null", "string"]}}
    assert forms.conf_from_form(params, {"param.batch": typed}) == {"batch": value}
    assert forms.conf_from_form({"n": {"type": ["integer", "string"]}}, {"param.n": "3"}) == {"n": 3}


def test_a_conf_refused_by_a_param_shows_its_value_as_json() -> None:
    params = from_description({"n": {"default": 1, "type": ["integer"]}, "mode": {"enum": ["full", "delta"]}})
    for conf, says in (({"n": True}, "--conf n=true is not of type integer"),
                       ({"n": "7"}, '--conf n="7" is not of type integer'),
                       ({"n": None}, "--conf n=null is not of type integer"),
                       ({"mode": "weekly"}, '--conf mode="weekly" is not one of ["full", "delta"]')):
        with pytest.raises(ValueError) as refused:
            check_conf(params, {"mode": "full", **conf}, dag_id="d")
        assert str(refused.value).startswith(f"{says} (param "), refused.value


def test_the_form_fields_show_each_param_with_its_default_and_choices() -> None:
    fields = {f["name"]: f for f in forms.param_fields(PARAMS)}
    assert fields["who"]["default"] == "world" and fields["n"]["default"] == "1"
    assert fields["mode"]["required"] and fields["mode"]["enum"] == ["full", "delta"]
    assert fields["any"]["default"] == "null"


@pytest.mark.parametrize(("given", "target"), [
    ("/runs/4", "/runs/4"), ("/dags/x?start=1", "/dags/x?start=1"), ("//evil.example", "/"),
    ("https://evil.example/", "/"), ("/\\evil.example", "/"), ("", "/"), (None, "/")])
def test_signing_in_only_returns_to_a_page_of_this_server(given: str | None, target: str) -> None:
    assert forms.local_target(given) == target


def test_roles_grow_from_viewer_to_admin() -> None:
    assert allows("admin", Role.OPERATOR) and allows("operator", Role.OPERATOR)
    assert not allows("viewer", Role.OPERATOR) and not allows("operator", Role.ADMIN)
    assert not allows("root", Role.VIEWER)  # an unknown role may nothing
