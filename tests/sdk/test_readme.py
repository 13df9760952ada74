"""The README's merchant walkthrough, as far as it uses the SDK: its Python blocks run against a live server and
a real delivered callback, and every `payments-merchant` command line it shows parses."""

import contextlib
import io
import json
import re
import shlex
import textwrap
from pathlib import Path

import pytest
from django.conf import settings

from apps.callbacks.deliver import callback_deliver
from apps.common import signing
from apps.ledger.services import balance_adjust
from payments_merchant.cli import _parser

README = (Path(settings.BASE_DIR) / "README.md").read_text()
WALKTHROUGH = README.split("## A merchant, end to end", 1)[1].split("\n## ", 1)[0]


def python_block(after: str) -> str:
    return re.search(r"```python\n(.*?)```", WALKTHROUGH.split(after, 1)[1], re.S).group(1)


def run(code: str, namespace: dict | None = None) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme", **(namespace or {})})  # noqa: S102
    return out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_readme_python_client_block_prints_the_balance(live_server, merchant, tmp_path, monkeypatch):
    balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=10000000, reason="readme")
    (tmp_path / "merchant.pem").write_bytes(signing.private_key_to_pem(merchant.private_key))
    monkeypatch.chdir(tmp_path)
    code = textwrap.dedent(python_block("The same from Python"))
    code = (code.replace("http://127.0.0.1:8000", live_server.url).replace("M10000001", merchant.merchant_no)
            .replace("A10000001", merchant.app_id))
    assert run(code).strip() == "Balance(currency='PHP', available=10000000, settling=0)"


def test_readme_callback_block_answers_success_for_a_real_callback(hooked_merchant, callback_receiver, enqueue,
                                                                   tmp_path, monkeypatch):
    from django.core.management import call_command

    callback_deliver(event_id=enqueue(hooked_merchant).pk)
    [received] = callback_receiver.requests
    monkeypatch.chdir(tmp_path)
    with open("platform_keys.json", "w") as out:
        call_command("platform_keys", stdout=out)
    code = textwrap.dedent(python_block("In the merchant's own receiver")) + "\nprint(status, reply)\n"
    assert run(code, {"request_body_bytes": received.raw}).strip() == "200 success"
    forged = json.dumps({**received.body, "amount": 1}).encode()
    assert run(code, {"request_body_bytes": forged}).strip() == "400 invalid callback"


def cli_lines() -> list[str]:
    text = re.sub(r"\\\n\s*", " ", WALKTHROUGH)
    return re.findall(r"uv run payments-merchant ([^`#\n]*)", text)  # in code blocks and inline code


def test_every_cli_line_of_the_readme_parses():
    lines = cli_lines()
    assert len(lines) >= 8
    for line in lines:
        args = shlex.split(line)
        if args == ["--help"]:
            continue
        parsed = _parser().parse_args(args)
        assert parsed.command, line
