"""What the README's tour and docs/api.md show a merchant's developer: the SDK's Python blocks of docs/api.md run
against a live server and a real delivered callback, and every command line of the README's tour parses, with the
SDK's parser or the management command's own."""

import contextlib
import io
import json
import re
import shlex
import textwrap
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import get_commands, load_command_class

from apps.callbacks.deliver import callback_deliver
from apps.common import signing
from apps.ledger.services import balance_adjust
from payments_merchant.cli import _parser

README = (Path(settings.BASE_DIR) / "README.md").read_text()
TOUR = README.split("## A ten-minute tour", 1)[1].split("\n## ", 1)[0]
API = (Path(settings.BASE_DIR) / "docs" / "api.md").read_text()


def python_block(heading: str) -> str:
    return re.search(r"```python\n(.*?)```", API.split(heading, 1)[1], re.S).group(1)


def run(code: str, namespace: dict | None = None) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/api.md", "exec"), {"__name__": "docs", **(namespace or {})})  # noqa: S102
    return out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_the_sdk_client_block_of_the_api_page_prints_the_balance(live_server, merchant, tmp_path, monkeypatch):
    balance_adjust(merchant_no=merchant.merchant_no, currency="PHP", amount=10000000, reason="docs")
    (tmp_path / "merchant.pem").write_bytes(signing.private_key_to_pem(merchant.private_key))
    monkeypatch.chdir(tmp_path)
    code = textwrap.dedent(python_block("### With the SDK"))
    code = (code.replace("http://127.0.0.1:8000", live_server.url).replace("M10000001", merchant.merchant_no)
            .replace("A10000001", merchant.app_id))
    assert run(code).strip() == "Balance(currency='PHP', available=10000000, settling=0)"


def test_the_sdk_callback_block_of_the_api_page_answers_success_for_a_real_callback(
        hooked_merchant, callback_receiver, enqueue, tmp_path, monkeypatch):
    from django.core.management import call_command

    callback_deliver(event_id=enqueue(hooked_merchant).pk)
    [received] = callback_receiver.requests
    monkeypatch.chdir(tmp_path)
    with open("platform_keys.json", "w") as out:
        call_command("platform_keys", stdout=out)
    code = textwrap.dedent(python_block("### Receiving callbacks with the SDK")) + "\nprint(status, reply)\n"
    assert run(code, {"request_body_bytes": received.raw}).strip() == "200 success"
    forged = json.dumps({**received.body, "amount": 1}).encode()
    assert run(code, {"request_body_bytes": forged}).strip() == "400 invalid callback"


def _tour_lines(command: str) -> list[str]:
    text = re.sub(r"\\\n\s*", " ", TOUR)
    found = re.findall(rf"uv run {command} ([^`\n]*)", text)
    return [re.split(r"\s(?:[>|]|&&)\s|#", line, maxsplit=1)[0].strip() for line in found]  # without redirections


def test_every_sdk_command_line_of_the_readme_tour_parses():
    lines = _tour_lines("payments-merchant")
    assert len(lines) >= 6, lines
    for line in lines:
        parsed = _parser().parse_args(shlex.split(line))
        assert parsed.command, line


def test_every_manage_py_line_of_the_readme_tour_parses_with_its_command():
    lines = _tour_lines("python manage.py")
    assert {shlex.split(line)[0] for line in lines} >= {"create_merchant", "adjust_balance", "platform_keys",
                                                       "portal_invite", "create_staff"}, lines
    commands = get_commands()
    for line in lines:
        name, *args = shlex.split(line.replace("$API_ROOT", "http://127.0.0.1:8123"))
        parser = load_command_class(commands[name], name).create_parser("manage.py", name)
        parser.parse_args(args)  # exits (SystemExit) on an option the command does not take


def test_the_readme_stays_a_front_door():
    lines = README.splitlines()
    assert len(lines) <= 155, len(lines)
    assert not [line for line in lines if len(line) > 120]
    assert README.count(":8000") == 0 and README.count("PORT=8000") == 1  # the default, said once
    for page in re.findall(r"\]\((docs/[a-z-]+\.md)\)", README):
        assert page == "docs/development.md" or (Path(settings.BASE_DIR) / page).exists(), page
    listed = set(re.findall(r"\]\(docs/([a-z-]+\.md)\)", README))
    assert {page.name for page in (Path(settings.BASE_DIR) / "docs").glob("*.md")} <= listed
