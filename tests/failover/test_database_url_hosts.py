"""A database URL may name a primary and its standbys, in libpq's form: the broker takes it as
libpq and asyncpg do, and refuses what neither would connect with, saying why."""

from __future__ import annotations

import pytest

from queen_timers.pgurl import BadDatabaseUrl, Target, parse_database_url


def test_one_host_is_as_before():
    t = parse_database_url("postgresql://u:p@db.example:5433/queen")
    assert t == Target("db.example", 5433)
    assert str(t) == "db.example:5433"


def test_hosts_in_the_netloc_each_with_its_port_or_the_default():
    t = parse_database_url(
        "postgresql://u:p@a.example:5433,b.example,[::1]:6000/queen?target_session_attrs=read-write"
    )
    assert t.endpoints == (("a.example", 5433), ("b.example", 5432), ("::1", 6000))
    assert t.session_attrs == "read-write"
    assert str(t) == "a.example:5433, b.example:5432, [::1]:6000 (read-write)"


def test_hosts_and_ports_in_the_query():
    t = parse_database_url(
        "postgresql://u@/queen?host=/run/a,/run/b&port=5001,5002&target_session_attrs=primary"
    )
    assert t.endpoints == (("/run/a", 5001), ("/run/b", 5002))
    assert str(t).startswith("the Unix socket in /run/a (port 5001), ")


def test_one_port_in_the_query_serves_every_host():
    t = parse_database_url("postgresql:///queen?host=/run/a,/run/b&port=7000")
    assert t.endpoints == (("/run/a", 7000), ("/run/b", 7000))


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgresql://u@a:1,b:notaport/db", "port 'notaport' is not a number"),
        ("postgresql://u@a:1,b:70000/db", "port 70000 is not from 1 to 65535"),
        ("postgresql:///db?host=/a,/b,/c&port=1,2", "3 hosts but 2 ports"),
        ("postgresql://u@a,b/db?target_session_attrs=leader", "target_session_attrs='leader'"),
        ("postgres//nohost/db", "no scheme"),
        ("postgresql:///db", "no host"),
    ],
)
def test_what_libpq_would_not_take_is_refused_with_the_reason(url, says):
    with pytest.raises(BadDatabaseUrl, match=says.replace("(", r"\(").replace(")", r"\)")):
        parse_database_url(url)
