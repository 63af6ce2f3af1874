"""Scoring side (it runs every action of an episode and replays gold with it; the agent side only names tools): the 16 retail tools, behaving exactly as upstream tau-bench's (spec: tau-bench-tools.md, 4-6).

Checks run in upstream's order and the first failure is returned; records are written only
through ``data.writable`` (see :mod:`state`). Quirks that are part of the contract are kept
and marked "quirk".
"""

from __future__ import annotations

import json
from typing import Any

from qitos.benchmark.tau_bench.common_tools import Calculate, GetUserDetails, Think, Tool, TransferToHumanAgents, record_json
from qitos.benchmark.tau_bench.state import TauDb

CANCEL_REASONS = ("no longer needed", "ordered by mistake")


def _address(address1: Any, address2: Any, city: Any, state: Any, country: Any, zip: Any) -> dict[str, Any]:
    # Key order of written addresses differs from the data files (state before country).
    return {"address1": address1, "address2": address2, "city": city, "state": state, "country": country, "zip": zip}


def _round_balance(method: dict[str, Any], delta: Any) -> None:
    method["balance"] += delta
    method["balance"] = round(method["balance"], 2)


def _over_requested(item_ids: Any, order: dict[str, Any]) -> list[Any]:
    """Requested ids asked for more often than the order holds them, in request order."""
    in_order = [item["item_id"] for item in order["items"]]
    return [item_id for item_id in item_ids if item_ids.count(item_id) > in_order.count(item_id)]


def _price_difference(data: TauDb, order: dict[str, Any], item_ids: Any, new_item_ids: Any) -> tuple[Any, str | None]:
    """Sum of (new variant price - old item price) over the pairs, never rounded; or an error."""
    products = data["products"]
    diff: Any = 0
    for item_id, new_item_id in zip(item_ids, new_item_ids, strict=False):  # lengths checked by the caller
        item = [item for item in order["items"] if item["item_id"] == item_id][0]
        variants = products[item["product_id"]]["variants"]
        if not (new_item_id in variants and variants[new_item_id]["available"]):
            return diff, f"Error: new item {new_item_id} not found or available"
        diff += variants[new_item_id]["price"] - item["price"]
    return diff, None


def _checked_swap(data: TauDb, order_id: str, item_ids: Any, new_item_ids: Any, payment_method_id: str,
                  status: str, refusal: str) -> tuple[dict[str, Any], dict[str, Any], Any] | str:
    """The checks shared by modifying and exchanging items, in upstream's order: (order, the user's payment
    methods, unrounded price difference), or the first error."""
    if order_id not in data["orders"]:
        return "Error: order not found"
    order = data.writable("orders", order_id)
    if order["status"] != status:
        return refusal
    missing = _over_requested(item_ids, order)
    if missing:
        return f"Error: {missing[0]} not found"
    if len(item_ids) != len(new_item_ids):
        return "Error: the number of items to be exchanged should match"
    diff, error = _price_difference(data, order, item_ids, new_item_ids)
    if error:
        return error
    methods = data["users"][order["user_id"]]["payment_methods"]
    if payment_method_id not in methods:
        return "Error: payment method not found"
    return order, methods, diff


class FindUserIdByEmail(Tool):
    name = "find_user_id_by_email"

    @staticmethod
    def invoke(data: TauDb, email: str) -> str:
        for user_id, profile in data["users"].items():
            if profile["email"].lower() == email.lower():
                return user_id
        return "Error: user not found"


class FindUserIdByNameZip(Tool):
    name = "find_user_id_by_name_zip"

    @staticmethod
    def invoke(data: TauDb, first_name: str, last_name: str, zip: str) -> str:
        for user_id, profile in data["users"].items():
            if (
                profile["name"]["first_name"].lower() == first_name.lower()
                and profile["name"]["last_name"].lower() == last_name.lower()
                and profile["address"]["zip"] == zip
            ):
                return user_id
        return "Error: user not found"


class GetOrderDetails(Tool):
    name = "get_order_details"

    @staticmethod
    def invoke(data: TauDb, order_id: str) -> str:
        return record_json(data["orders"], order_id, "order")


class GetProductDetails(Tool):
    name = "get_product_details"

    @staticmethod
    def invoke(data: TauDb, product_id: str) -> str:
        return record_json(data["products"], product_id, "product")


class ListAllProductTypes(Tool):
    name = "list_all_product_types"

    @staticmethod
    def invoke(data: TauDb) -> str:
        by_name = {product["name"]: product["product_id"] for product in data["products"].values()}
        return json.dumps(dict(sorted(by_name.items())))


class CancelPendingOrder(Tool):
    name = "cancel_pending_order"

    @staticmethod
    def invoke(data: TauDb, order_id: str, reason: str) -> str:
        if order_id not in data["orders"]:
            return "Error: order not found"
        order = data.writable("orders", order_id)
        if order["status"] != "pending":
            return "Error: non-pending order cannot be cancelled"
        if reason not in CANCEL_REASONS:
            return "Error: invalid reason"
        refunds = []
        for payment in order["payment_history"]:  # quirk: earlier refunds are refunded again
            method_id = payment["payment_method_id"]
            refunds.append({"transaction_type": "refund", "amount": payment["amount"], "payment_method_id": method_id})
            if "gift_card" in method_id:  # quirk: substring test, not the method's source
                user = data.writable("users", order["user_id"])
                _round_balance(user["payment_methods"][method_id], payment["amount"])
        order["status"] = "cancelled"
        order["cancel_reason"] = reason
        order["payment_history"].extend(refunds)
        return json.dumps(order)


class ModifyPendingOrderAddress(Tool):
    name = "modify_pending_order_address"

    @staticmethod
    def invoke(
        data: TauDb, order_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str
    ) -> str:
        if order_id not in data["orders"]:
            return "Error: order not found"
        order = data.writable("orders", order_id)
        if order["status"] != "pending":
            return "Error: non-pending order cannot be modified"
        order["address"] = _address(address1, address2, city, state, country, zip)
        return json.dumps(order)


class ModifyUserAddress(Tool):
    name = "modify_user_address"

    @staticmethod
    def invoke(
        data: TauDb, user_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str
    ) -> str:
        if user_id not in data["users"]:
            return "Error: user not found"
        user = data.writable("users", user_id)
        user["address"] = _address(address1, address2, city, state, country, zip)
        return json.dumps(user)


class ModifyPendingOrderPayment(Tool):
    name = "modify_pending_order_payment"

    @staticmethod
    def invoke(data: TauDb, order_id: str, payment_method_id: str) -> str:
        if order_id not in data["orders"]:
            return "Error: order not found"
        order = data.writable("orders", order_id)
        if order["status"] != "pending":
            return "Error: non-pending order cannot be modified"
        methods = data["users"][order["user_id"]]["payment_methods"]
        if payment_method_id not in methods:
            return "Error: payment method not found"
        history = order["payment_history"]
        if len(history) > 1 or history[0]["transaction_type"] != "payment":
            return "Error: there should be exactly one payment for a pending order"
        old_id = history[0]["payment_method_id"]
        if old_id == payment_method_id:
            return "Error: the new payment method should be different from the current one"
        amount = history[0]["amount"]
        if methods[payment_method_id]["source"] == "gift_card" and methods[payment_method_id]["balance"] < amount:
            return "Error: insufficient gift card balance to pay for the order"
        history.append({"transaction_type": "payment", "amount": amount, "payment_method_id": payment_method_id})
        history.append({"transaction_type": "refund", "amount": amount, "payment_method_id": old_id})
        user_methods = data.writable("users", order["user_id"])["payment_methods"]
        if user_methods[payment_method_id]["source"] == "gift_card":
            _round_balance(user_methods[payment_method_id], -amount)
        if "gift_card" in old_id:  # quirk: substring test for the refunded method
            _round_balance(user_methods[old_id], amount)
        return json.dumps(order)


class ModifyPendingOrderItems(Tool):
    name = "modify_pending_order_items"

    @staticmethod
    def invoke(data: TauDb, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str) -> str:
        checked = _checked_swap(data, order_id, item_ids, new_item_ids, payment_method_id,
                                "pending", "Error: non-pending order cannot be modified")
        if isinstance(checked, str):
            return checked
        order, methods, diff = checked
        if methods[payment_method_id]["source"] == "gift_card" and methods[payment_method_id]["balance"] < diff:
            return "Error: insufficient gift card balance to pay for the new item"
        # quirk: the unrounded difference is recorded, and a zero difference is a "refund"
        order["payment_history"].append(
            {
                "transaction_type": "payment" if diff > 0 else "refund",
                "amount": abs(diff),
                "payment_method_id": payment_method_id,
            }
        )
        if methods[payment_method_id]["source"] == "gift_card":
            user = data.writable("users", order["user_id"])
            _round_balance(user["payment_methods"][payment_method_id], -diff)
        products = data["products"]
        for item_id, new_item_id in zip(item_ids, new_item_ids, strict=False):
            # quirk: earlier pairs' changes are visible when looking up later pairs
            item = [item for item in order["items"] if item["item_id"] == item_id][0]
            variant = products[item["product_id"]]["variants"][new_item_id]
            item["item_id"] = new_item_id
            item["price"] = variant["price"]
            item["options"] = dict(variant["options"])  # a copy: the product record stays pristine
        order["status"] = "pending (item modified)"
        return json.dumps(order)


class ExchangeDeliveredOrderItems(Tool):
    name = "exchange_delivered_order_items"

    @staticmethod
    def invoke(data: TauDb, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str) -> str:
        checked = _checked_swap(data, order_id, item_ids, new_item_ids, payment_method_id,
                                "delivered", "Error: non-delivered order cannot be exchanged")
        if isinstance(checked, str):
            return checked
        order, methods, diff = checked
        diff = round(diff, 2)
        if methods[payment_method_id]["source"] == "gift_card" and methods[payment_method_id]["balance"] < diff:
            return "Error: insufficient gift card balance to pay for the price difference"
        order["status"] = "exchange requested"
        order["exchange_items"] = sorted(item_ids)  # quirk: sorted independently, pairing is lost
        order["exchange_new_items"] = sorted(new_item_ids)
        order["exchange_payment_method_id"] = payment_method_id
        order["exchange_price_difference"] = diff
        return json.dumps(order)


class ReturnDeliveredOrderItems(Tool):
    name = "return_delivered_order_items"

    @staticmethod
    def invoke(data: TauDb, order_id: str, item_ids: list[str], payment_method_id: str) -> str:
        if order_id not in data["orders"]:
            return "Error: order not found"
        order = data.writable("orders", order_id)
        if order["status"] != "delivered":
            return "Error: non-delivered order cannot be returned"
        if payment_method_id not in data["users"][order["user_id"]]["payment_methods"]:
            return "Error: payment method not found"
        original_id = order["payment_history"][0]["payment_method_id"]
        if "gift_card" not in payment_method_id and payment_method_id != original_id:
            return "Error: payment method should be either the original payment method or a gift card"
        if _over_requested(item_ids, order):
            return "Error: some item not found"
        order["status"] = "return requested"
        order["return_items"] = sorted(item_ids)
        order["return_payment_method_id"] = payment_method_id
        return json.dumps(order)


# Registry order = upstream's tools_info order.
RETAIL_TOOLS: tuple[type[Tool], ...] = (
    Calculate,
    CancelPendingOrder,
    ExchangeDeliveredOrderItems,
    FindUserIdByEmail,
    FindUserIdByNameZip,
    GetOrderDetails,
    GetProductDetails,
    GetUserDetails,
    ListAllProductTypes,
    ModifyPendingOrderAddress,
    ModifyPendingOrderItems,
    ModifyPendingOrderPayment,
    ModifyUserAddress,
    ReturnDeliveredOrderItems,
    Think,
    TransferToHumanAgents,
)
