"""`payments-merchant`: try the API from a shell. Prints the result's `data` as JSON; on an error code prints
`{"code", "msg", "http_status"}` and exits 1.

Settings: options, else PAYMENTS_API_ROOT, PAYMENTS_MERCHANT_NO, PAYMENTS_APP_ID, PAYMENTS_KEY_FILE,
PAYMENTS_KEY_VERSION.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from payments_merchant.callbacks import verify_callback
from payments_merchant.client import PaymentsClient, get_currencies
from payments_merchant.errors import (CallbackVerificationError, PaymentsError, StatementVerificationError,
                                      UnknownCallbackError)
from payments_merchant.statements import split_statement, statement_is_final, verify_statement


def _parser() -> argparse.ArgumentParser:
    env = os.environ
    parser = argparse.ArgumentParser(prog="payments-merchant", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _settings_args(parser, defaults={
        "api_root": env.get("PAYMENTS_API_ROOT", "http://127.0.0.1:8000"),
        "merchant_no": env.get("PAYMENTS_MERCHANT_NO"), "app_id": env.get("PAYMENTS_APP_ID"),
        "key": env.get("PAYMENTS_KEY_FILE"), "key_version": int(env.get("PAYMENTS_KEY_VERSION", "1")),
        "timeout": 10.0})
    # The same options after the subcommand too (`payments-merchant balance --api-root ...`).
    settings_after = argparse.ArgumentParser(add_help=False)
    _settings_args(settings_after, defaults=None)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return commands.add_parser(name, parents=[settings_after], **kwargs)

    balance = command("balance", help="available and settling balance of one currency")
    balance.add_argument("--currency", help="ISO code; the platform's default is PHP")

    command("currencies", help="public currency list (unsigned)")

    pay_create = command("pay-create", aliases=["pay/create"], help="create a collection order")
    _order_args(pay_create)
    pay_create.add_argument("--subject")
    pay_create.add_argument("--return-url")
    pay_create.add_argument("--expire-seconds", type=int)
    pay_create.add_argument("--attach")

    for name, what in (("pay-query", "a collection order"), ("payout-query", "a payout order")):
        query = command(name, aliases=[name.replace("-", "/")], help=f"query {what}")
        numbers = query.add_mutually_exclusive_group(required=True)
        numbers.add_argument("--mch-order-no")
        numbers.add_argument("--platform-order-no")

    payout_create = command("payout-create", aliases=["payout/create"], help="create a payout")
    _order_args(payout_create)
    payout_create.add_argument("--payee-name", required=True)
    payout_create.add_argument("--payee-account", required=True)
    payout_create.add_argument("--bank-code", required=True)
    payout_create.add_argument("--attach")

    refund_create = command("refund-create", aliases=["refund/create"], help="refund a paid collection order")
    order = refund_create.add_mutually_exclusive_group(required=True)
    order.add_argument("--mch-order-no")
    order.add_argument("--platform-order-no")
    refund_create.add_argument("--mch-refund-no", required=True)
    refund_create.add_argument("--amount", type=int, required=True, help="minor units, e.g. 10000 for 100.00")
    refund_create.add_argument("--reason")

    refund_query = command("refund-query", aliases=["refund/query"], help="query a refund")
    refund_numbers = refund_query.add_mutually_exclusive_group(required=True)
    refund_numbers.add_argument("--mch-refund-no")
    refund_numbers.add_argument("--refund-no")

    events = command("events", help="this merchant's callback events with their attempts, newest first")
    events.add_argument("--platform-order-no")
    events.add_argument("--type", choices=["collection.success", "payout.terminal", "payout.reversed",
                                           "refund.terminal"])
    events.add_argument("--status", choices=["pending", "delivered", "dead"])
    events.add_argument("--created-from", type=int, metavar="UNIX_SECONDS")
    events.add_argument("--created-to", type=int, metavar="UNIX_SECONDS")
    events.add_argument("--limit", type=int, help="events per page, 1-100 (default 20)")
    events.add_argument("--cursor", help="next_cursor of the previous page")
    events.add_argument("--all", action="store_true", help="walk every page; prints {\"events\": [...]}")

    resend = command("resend", help="one more attempt of a delivered or dead callback event, freshly signed")
    which = resend.add_mutually_exclusive_group(required=True)
    which.add_argument("--event-id", type=int)
    which.add_argument("--platform-order-no")
    resend.add_argument("--type", help="with --platform-order-no: the event's type")

    statement = command("statement", help="one day's signed statement of one currency")
    statement.add_argument("--date", required=True, help="YYYY-MM-DD, in the platform's settlement time zone")
    statement.add_argument("--currency", required=True)
    statement.add_argument("--csv", metavar="FILE", help="save the signed CSV here (prints its path and digest)")

    for name, what in (("verify-callback", "a callback body"), ("verify-statement", "a statement's CSV")):
        verify = command(name, help=f"verify {what} (a file, or - for stdin)")
        verify.add_argument("body", help="the file, or - for stdin")
        verify.add_argument("--platform-keys", metavar="JSON_FILE",
                            help="the platform's keys as `manage.py platform_keys` prints them")
        verify.add_argument("--platform-key", action="append", default=[], metavar="VERSION=PEM_FILE",
                            help="a platform public key per version, e.g. 1=platform_v1.pub (repeatable)")
    return parser


def _settings_args(parser: argparse.ArgumentParser, *, defaults: dict[str, Any] | None) -> None:
    """The connection settings; with defaults=None they do not override what the main parser set."""

    def default(name: str) -> Any:
        return argparse.SUPPRESS if defaults is None else defaults[name]

    parser.add_argument("--api-root", default=default("api_root"),
                        help="platform root, e.g. http://127.0.0.1:8000 (PAYMENTS_API_ROOT)")
    parser.add_argument("--merchant-no", default=default("merchant_no"), help="(PAYMENTS_MERCHANT_NO)")
    parser.add_argument("--app-id", default=default("app_id"), help="(PAYMENTS_APP_ID)")
    parser.add_argument("--key", default=default("key"), help="merchant private key, PEM file (PAYMENTS_KEY_FILE)")
    parser.add_argument("--key-version", type=int, default=default("key_version"),
                        help="version of that key on the platform, default 1 (PAYMENTS_KEY_VERSION)")
    parser.add_argument("--timeout", type=float, default=default("timeout"), help="seconds, default 10")


def _order_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mch-order-no", required=True)
    parser.add_argument("--product-code", required=True)
    parser.add_argument("--amount", type=int, required=True, help="minor units, e.g. 10000 for 100.00")
    parser.add_argument("--currency", required=True)


def _client(args: argparse.Namespace, parser: argparse.ArgumentParser) -> PaymentsClient:
    missing = [flag for flag, value in (("--merchant-no", args.merchant_no), ("--app-id", args.app_id),
                                        ("--key", args.key)) if not value]
    if missing:
        parser.error(f"{', '.join(missing)} required (or PAYMENTS_MERCHANT_NO, PAYMENTS_APP_ID, PAYMENTS_KEY_FILE)")
    try:
        return PaymentsClient.from_key_file(args.key, api_root=args.api_root, merchant_no=args.merchant_no,
                                            app_id=args.app_id, key_version=args.key_version, timeout=args.timeout)
    except (OSError, ValueError, TypeError) as exc:  # unreadable file, not a PEM key, an encrypted key
        parser.error(f"cannot use the key {args.key}: {exc}")


def _run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Any:
    command = args.command.replace("/", "-")
    if command == "currencies":
        return {"items": [dict(c.raw) for c in get_currencies(args.api_root, timeout=args.timeout)]}
    if command in ("verify-callback", "verify-statement"):
        keys = _platform_keys(args, parser)
        body = sys.stdin.buffer.read() if args.body == "-" else Path(args.body).read_bytes()
        if command == "verify-statement":
            fields = verify_statement(body, keys)
            return {"verified": True, "final": statement_is_final(body.decode("utf-8")), **fields}
        event = verify_callback(body, keys)
        return {"type": type(event).__name__, **dict(event.raw)}
    client = _client(args, parser)
    if command == "events":
        filters = dict(platform_order_no=args.platform_order_no, type=args.type, status=args.status,
                       created_from=args.created_from, created_to=args.created_to, limit=args.limit)
        if args.all:
            return {"events": list(client.iter_callback_events(**filters))}
        return client.callback_events(cursor=args.cursor, **filters).raw
    if command == "resend":
        return client.callback_resend(event_id=args.event_id, platform_order_no=args.platform_order_no,
                                      type=args.type)
    if command == "statement":
        if not args.csv:
            return client.statement(date=args.date, currency=args.currency).raw
        content = client.statement_csv(date=args.date, currency=args.currency)
        Path(args.csv).write_bytes(content)
        header, _ = split_statement(content.decode("utf-8"))
        return {"file": args.csv, "bytes": len(content), "digest": header.get("digest")}
    if command == "balance":
        return client.balance(args.currency).raw
    if command == "refund-create":
        return client.refund_create(mch_order_no=args.mch_order_no, platform_order_no=args.platform_order_no,
                                    mch_refund_no=args.mch_refund_no, amount=args.amount, reason=args.reason).raw
    if command == "refund-query":
        return client.refund_query(mch_refund_no=args.mch_refund_no, refund_no=args.refund_no).raw
    if command in ("pay-query", "payout-query"):
        query = client.pay_query if command == "pay-query" else client.payout_query
        return query(mch_order_no=args.mch_order_no, platform_order_no=args.platform_order_no).raw
    common = dict(mch_order_no=args.mch_order_no, product_code=args.product_code, amount=args.amount,
                  currency=args.currency, attach=args.attach)
    if command == "pay-create":
        return client.pay_create(subject=args.subject, return_url=args.return_url,
                                 expire_seconds=args.expire_seconds, **common).raw
    return client.payout_create(payee_name=args.payee_name, payee_account=args.payee_account,
                                bank_code=args.bank_code, **common).raw


def _platform_keys(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict[int, str]:
    keys: dict[int, str] = {}
    if args.platform_keys:
        published = json.loads(Path(args.platform_keys).read_text())
        keys.update({item["key_version"]: item["public_key"] for item in published["keys"]})
    for item in args.platform_key:
        version, _, path = item.partition("=")
        keys[int(version)] = Path(path).read_text()
    if not keys:
        parser.error(f"{args.command} needs --platform-keys or --platform-key")
    return keys


def _print(value: Mapping[str, Any] | Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False, default=dict))
    sys.stdout.flush()  # here, where a closed pipe is handled (main), not at interpreter exit


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader stopped early (`payments-merchant events --all | head`): quiet, with the exit status of a
        # program ended by SIGPIPE (128 + 13), as git and coreutils give, instead of a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # what is left in the buffer goes nowhere
        return 141


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        _print(_run(args, parser))
    except PaymentsError as exc:
        _print({"code": exc.code, "msg": exc.msg, "http_status": exc.http_status})
        return 1
    except (CallbackVerificationError, StatementVerificationError) as exc:
        _print({"verified": False, "error": str(exc)})
        return 1
    except UnknownCallbackError as exc:
        _print({"verified": True, "error": str(exc)})
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
