"""Tool behaviour pinned by the spec's test vectors, registry/schema agreement and error texts."""

from __future__ import annotations

import json
import random
import re
import warnings

import pytest

from qitos.benchmark.tau_bench import (
    DomainData,
    InvalidActionError,
    InvalidObservationError,
    canonical_digest,
    upstream_data_hash,
)
from qitos.benchmark.tau_bench.common_tools import TOO_LARGE_MESSAGE, Calculate
from qitos.benchmark.tau_bench.tools import domain_tools

from .conftest import stop_env


def _camel(name: str) -> str:
    return re.sub(r"(?:^|_)([a-z])", lambda match: match.group(1).upper(), name)


@pytest.mark.parametrize("domain_name", ["retail", "airline"])
def test_registry_matches_shipped_schemas(domains: dict[str, DomainData], domain_name: str) -> None:
    domain = domains[domain_name]
    tools = domain_tools(domain_name)
    assert list(tools) == [info["function"]["name"] for info in domain.tools_info]
    for info in domain.tools_info:
        tool = tools[info["function"]["name"]]
        assert tool.__name__ == _camel(tool.name)
        params = list(tool.invoke.__code__.co_varnames[: tool.invoke.__code__.co_argcount])
        assert params == ["data", *info["function"]["parameters"]["properties"]]


def test_argument_errors_use_python_wording(retail: DomainData) -> None:
    env = stop_env(retail, 0)
    assert env.step("get_user_details", {}).observation == (
        "Error: GetUserDetails.invoke() missing 1 required positional argument: 'user_id'"
    )
    assert env.step("modify_pending_order_payment", {}).observation == (
        "Error: ModifyPendingOrderPayment.invoke() missing 2 required positional arguments: "
        "'order_id' and 'payment_method_id'"
    )
    assert env.step("find_user_id_by_name_zip", {}).observation == (
        "Error: FindUserIdByNameZip.invoke() missing 3 required positional arguments: "
        "'first_name', 'last_name', and 'zip'"
    )
    assert env.step("list_all_product_types", {"x": 1, "y": 2}).observation == (
        "Error: ListAllProductTypes.invoke() got an unexpected keyword argument 'x'"
    )
    assert env.step("get_user_details", {"data": {}}).observation == (
        "Error: tau_bench.envs.retail.tools.get_user_details.GetUserDetails.invoke() "
        "got multiple values for keyword argument 'data'"
    )
    assert env.step("get_order_details", {"order_id": ["#W1"]}).observation == "Error: unhashable type: 'list'"
    assert env.step("calculate", {"expression": 5}).observation == "Error: 'int' object is not iterable"
    assert env.step("delete_user_account", {}).observation == "Unknown action delete_user_account"
    assert env.state_digest() == retail.pristine.digest()


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("3", "3.0"), ("10/3", "3.33"), ("2**3", "8.0"), ("0.1+0.2", "0.3"), ("-0.001", "-0.0"),
        ("1.005*1", "1.0"), ("10**20", "1e+20"), ("1/0", "Error: division by zero"),
        ("1.0/0", "Error: float division by zero"), ("1//0", "Error: integer division or modulo by zero"),
        ("1 2", "Error: invalid syntax (<string>, line 1)"), ("", "Error: invalid syntax (<string>, line 0)"),
        ("(1", "Error: '(' was never closed (<string>, line 1)"),
        ("()", "Error: float() argument must be a string or a real number, not 'tuple'"),
        ("1,2", "Error: invalid characters in expression"), ("2\t+2", "Error: invalid characters in expression"),
        ("10**400/10**399", "10.0"), ("9**9**9", f"Error: {TOO_LARGE_MESSAGE}"),
    ],
)  # fmt: skip
def test_calculate_vectors(expression: str, expected: str) -> None:
    assert Calculate.invoke(None, expression) == expected


def test_calculate_matches_python_eval_on_random_input() -> None:
    def upstream(expression: str) -> str:
        if not all(char in "0123456789+-*/(). " for char in expression):
            return "Error: invalid characters in expression"
        try:
            return str(round(float(eval(expression, {"__builtins__": None}, {})), 2))  # noqa: S307
        except Exception as exc:  # noqa: BLE001
            return f"Error: {exc}"

    rng = random.Random(7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3000):
            expression = "".join(rng.choice("0123456789+-*/(). ") for _ in range(rng.randint(0, 10)))
            if expression.count("**") > 1:
                continue  # could run for ever upstream
            assert Calculate.invoke(None, expression) == upstream(expression), expression


def test_modify_user_address_vector(retail: DomainData) -> None:
    env = stop_env(retail, 0)
    kwargs = {"user_id": "noah_brown_6181", "address1": "1 A St", "address2": "", "city": "X", "state": "CA",
              "country": "USA", "zip": "12345"}  # fmt: skip
    user = json.loads(env.step("modify_user_address", kwargs).observation)
    assert json.dumps(user["address"]) == (
        '{"address1": "1 A St", "address2": "", "city": "X", "state": "CA", "country": "USA", "zip": "12345"}'
    )
    assert env.db.upstream_hash() == "40eea64a15d19d495b6eba845c81ed178c76214d8b24c77589720b870d63153d"
    assert upstream_data_hash(env.export_db()) == env.db.upstream_hash()
    assert canonical_digest(env.export_db()) == env.state_digest()


def test_modify_items_keeps_unrounded_difference(retail: DomainData) -> None:
    env = stop_env(retail, 0)
    order = json.loads(
        env.step(
            "modify_pending_order_items",
            {"order_id": "#W6779827", "item_ids": ["7896397433"], "new_item_ids": ["6171242004"],
             "payment_method_id": "gift_card_7219486"},
        ).observation
    )  # fmt: skip
    assert order["payment_history"][-1] == {
        "transaction_type": "payment", "amount": 5.029999999999973, "payment_method_id": "gift_card_7219486",
    }  # fmt: skip
    assert order["status"] == "pending (item modified)"
    user = json.loads(env.step("get_user_details", {"user_id": "ethan_lopez_6291"}).observation)
    assert user["payment_methods"]["gift_card_7219486"]["balance"] == 43.97


def test_book_reservation_vector_and_id_sequence(airline: DomainData) -> None:
    env = stop_env(airline, 0)
    kwargs = airline.task("test", 0).actions[0].kwargs
    booked = json.loads(env.step("book_reservation", kwargs).observation)
    assert booked["reservation_id"] == "HATHAT"
    assert [flight["price"] for flight in booked["flights"]] == [152, 103]
    assert list(booked["flights"][0]) == ["flight_number", "date", "price", "origin", "destination"]
    user = json.loads(env.step("get_user_details", {"user_id": "mia_li_3668"}).observation)
    assert "certificate_7504069" not in user["payment_methods"]
    assert kwargs["flights"][0] == {"flight_number": "HAT136", "date": "2024-05-20"}  # task data untouched
    empty = {"user_id": "mia_li_3668", "origin": "JFK", "destination": "SEA", "flight_type": "one_way",
             "cabin": "economy", "flights": [], "passengers": [], "payment_methods": [], "total_baggages": 0,
             "nonfree_baggages": 0, "insurance": "no"}  # fmt: skip
    ids = [json.loads(env.step("book_reservation", empty).observation)["reservation_id"] for _ in range(3)]
    assert ids == ["HATHAU", "HATHAV", "HATHAV"]
    user = json.loads(env.step("get_user_details", {"user_id": "mia_li_3668"}).observation)
    assert user["reservations"][-4:] == ["HATHAT", "HATHAU", "HATHAV", "HATHAV"]


def test_update_flights_keeps_stale_cabin(airline: DomainData) -> None:
    env = stop_env(airline, 2)
    kwargs = airline.task("test", 2).actions[0].kwargs
    reservation = json.loads(env.step("update_reservation_flights", kwargs).observation)
    assert [flight["price"] for flight in reservation["flights"]] == [140, 101]
    assert reservation["payment_history"][-1]["amount"] == -6594
    assert reservation["cabin"] == "business"


def test_fourth_certificate_raises_and_changes_nothing(airline: DomainData) -> None:
    env = stop_env(airline, 0)
    for number in (3221322, 3221323, 3221324):
        observation = env.step("send_certificate", {"user_id": "mia_li_3668", "amount": 100}).observation
        assert observation == f"Certificate certificate_{number} added to user mia_li_3668 with amount 100."
    before = env.state_digest()
    with pytest.raises(InvalidObservationError, match="send_certificate"):
        env.step("send_certificate", {"user_id": "mia_li_3668", "amount": 100})
    assert env.state_digest() == before
    assert env.actions[-1].name == "send_certificate"  # logged, as upstream does before dispatch


def test_transfer_with_bad_arguments_still_ends(retail: DomainData) -> None:
    env = stop_env(retail, 0)
    result = env.step("transfer_to_human_agents", {})
    assert result.done and result.reward is not None
    assert result.observation.startswith("Error: TransferToHumanAgents.invoke() missing 1")


def test_malformed_actions_raise_clear_errors(retail: DomainData) -> None:
    env = stop_env(retail, 0)
    with pytest.raises(InvalidActionError, match="content"):
        env.step("respond", {})
    with pytest.raises(InvalidActionError, match="JSON object"):
        env.step("get_user_details", ["noah_brown_6181"])  # type: ignore[arg-type]
    with pytest.raises(InvalidActionError, match="names"):
        env.step("get_user_details", {1: "noah_brown_6181"})  # type: ignore[dict-item]


def test_hash_example_from_spec() -> None:
    db = {"b": [1, 2.0, {"x": "it's"}], "a": {}}
    assert upstream_data_hash(db) == "cfdeb08db8ac137d89856b310a047fc001d0e78e1f4c73f8d3b8a2e659531a19"
