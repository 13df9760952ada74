"""Two seats, one person (docs/staff-access.md, "Independence"): the one rule that every decision taking two people
uses, staff and merchant side alike (staff requests, payout reviews, the portal's approvals).

A person controls every account they acted on: created it, invited it, granted it a role, set its password, added
or removed its second factor, reset its access. Control is transitive: whoever controls an account controls every
account that one acted on. Two accounts are independent people only when no one controls both: neither controls
the other, and no third account controls them both (one superuser's two accomplices are not two people). Acts made
from a shell on the server name no person and never count.

The acts come from sources: the explicit AccountAct rows, and each source an app registers for acts its own trail
already holds (account_act_source_register): apps.common registers the settings trail of users and roles
(staff_trail_acts) and of second factors (second_factor_trail_acts). A source answers, for a set of subject user ids, who acted on them."""

from dataclasses import dataclass
from typing import Callable, Iterable

from django.contrib.auth import get_user_model

from apps.common.models import AccountAct


@dataclass(frozen=True)
class Act:
    actor_id: int
    subject_id: int
    what: str  # "created or changed the account of", "invited", ... (reads: "<actor> <what> <subject>")


# (subject_ids) -> the acts of other people on those subjects.
ActSource = Callable[[set[int]], Iterable[Act]]
_SOURCES: list[ActSource] = []


def account_act_source_register(source: ActSource) -> None:
    """Called once from an AppConfig.ready(): a trail of acts on accounts that the rule must read."""
    if source not in _SOURCES:
        _SOURCES.append(source)


def account_act_record(*, actor, subject, act: str, note: str = "") -> AccountAct | None:
    """Write one act in the caller's transaction. No row for an act of a shell (no actor) or on one's own account."""
    if not getattr(actor, "pk", None) or actor.pk == subject.pk:
        return None
    return AccountAct.objects.create(actor_id=actor.pk, subject_id=subject.pk, act=act, note=note[:255])


def _recorded_acts(subject_ids: set[int]) -> Iterable[Act]:
    for actor_id, subject_id, act in (AccountAct.objects.filter(subject_id__in=subject_ids)
                                      .values_list("actor_id", "subject_id", "act")):
        yield Act(actor_id, subject_id, AccountAct.Act(act).label)


def _controllers(user_id: int) -> dict[int, Act | None]:
    """Every account that controls `user_id` (itself included, with None), each with the act by which it reached the
    chain: breadth first over the sources until no new account turns up."""
    found: dict[int, Act | None] = {user_id: None}
    frontier = {user_id}
    while frontier:
        acts = [act for source in (_recorded_acts, *_SOURCES) for act in source(frontier)
                if act.actor_id and act.actor_id != act.subject_id]
        frontier = set()
        for act in acts:
            if act.actor_id not in found:
                found[act.actor_id] = act
                frontier.add(act.actor_id)
    return found


def _chain(found: dict[int, Act | None], top: int, names: dict[int, str]) -> str:
    """'a invited b, b set the password of c': how `top` reaches the account `found` was built from."""
    steps, at = [], top
    while found[at] is not None:
        act = found[at]
        steps.append(f"{names[act.actor_id]} {act.what} {names[act.subject_id]}")
        at = act.subject_id
    return ", ".join(steps)


def independence_conflict(first, second) -> str:
    """Why these two users are not two independent people ("" when they are): one controls the other, or a third
    account controls both. The sentence names the chain, for the person refused."""
    if first.pk == second.pk:
        return f"{first.get_username()} is the same account"
    of_first, of_second = _controllers(first.pk), _controllers(second.pk)
    shared = of_first.keys() & of_second.keys()
    if not shared:
        return ""
    # The nearest shared controller: the other account itself when it is one, else the one with the shortest chains.
    top = second.pk if second.pk in shared else first.pk if first.pk in shared else min(
        shared, key=lambda pk: (_depth(of_first, pk) + _depth(of_second, pk), pk))
    ids = {pk for found in (of_first, of_second) for pk in found}
    names = dict(get_user_model().objects.filter(pk__in=ids).values_list("pk", "username"))
    chains = [c for c in (_chain(of_first, top, names), _chain(of_second, top, names)) if c]
    return f"{names[first.pk]} and {names[second.pk]} are not independent: {'; '.join(chains)}"


def maker_checker_refusal(*, maker, checker_user, what: str) -> str:
    """Why `checker_user` may not approve the `what` ("batch", "refund") that `maker` asked for, in the words a
    merchant's owner reads, or "" when they may: another person than the maker, and independent of them
    (independence_conflict; docs/portal.md, "Maker-checker and independence")."""
    if maker.pk == checker_user.pk:
        return f"You asked for this {what}: another owner must approve it (maker-checker)."
    if conflict := independence_conflict(maker, checker_user):
        return (f"You cannot approve this {what}: {conflict}. An owner independent of the person who asked must "
                "approve it (maker-checker).")
    return ""


def _depth(found: dict[int, Act | None], top: int) -> int:
    depth, at = 0, top
    while found[at] is not None:
        depth, at = depth + 1, found[at].subject_id
    return depth


def _as_user_id(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def staff_trail_acts(subject_ids: set[int]) -> Iterable[Act]:
    """The acts the settings trail of users holds (apps.common.models): who created or changed an account (its
    flags, its password), who granted it a role or a permission, who gave one of its roles a permission. The actor
    is the trail's context user (the admin's signed-in person); a change from a shell names none."""
    from django.contrib.auth.models import Group

    from apps.common.models import GroupPermissionEvent, UserEvent, UserGroupEvent, UserPermissionEvent

    actor = "pgh_context__metadata__user"
    for actor_id, subject_id, label in UserEvent.objects.filter(pgh_obj_id__in=subject_ids).exclude(
            **{f"{actor}__isnull": True}).values_list(actor, "pgh_obj_id", "pgh_label").distinct():
        what = "set the password of" if label == "password_set" else "created or changed the account of"
        yield Act(_as_user_id(actor_id), subject_id, what)
    for events in (UserGroupEvent, UserPermissionEvent):
        for actor_id, subject_id in events.objects.filter(user_id__in=subject_ids).exclude(
                **{f"{actor}__isnull": True}).values_list(actor, "user_id").distinct():
            yield Act(_as_user_id(actor_id), subject_id, "granted a role or permission to")
    members = Group.user_set.through.objects.filter(user_id__in=subject_ids).values_list("group_id", "user_id")
    by_group: dict[int, set[int]] = {}
    for group_id, user_id in members:
        by_group.setdefault(group_id, set()).add(user_id)
    if by_group:
        for actor_id, group_id in GroupPermissionEvent.objects.filter(group_id__in=by_group).exclude(
                **{f"{actor}__isnull": True}).values_list(actor, "group_id").distinct():
            for subject_id in by_group[group_id]:
                yield Act(_as_user_id(actor_id), subject_id, "gave a permission to a role of")


SECOND_FACTOR_WHAT = {"insert": "added a second factor to", "update": "confirmed a second factor of",
                      "delete": "removed the second factor of"}


def second_factor_trail_acts(subject_ids: set[int]) -> Iterable[Act]:
    """The acts the settings trail of second factors holds (apps.common.models): who added, confirmed or removed an
    authenticator or recovery codes of whose account, by whatever path ran in a context naming a user (the admin,
    a service called from a request). Enrolling one's own authenticator is no act on another (the rule drops acts
    on oneself); a shell names none."""
    from apps.common.models import AuthenticatorEvent, RecoveryCodesEvent

    actor = "pgh_context__metadata__user"
    for events in (AuthenticatorEvent, RecoveryCodesEvent):
        for actor_id, subject_id, label in events.objects.filter(user_id__in=subject_ids).exclude(
                **{f"{actor}__isnull": True}).values_list(actor, "user_id", "pgh_label").distinct():
            if actor_id := _as_user_id(actor_id):  # a request before sign-in names no user
                yield Act(actor_id, subject_id, SECOND_FACTOR_WHAT.get(label, "changed a second factor of"))
