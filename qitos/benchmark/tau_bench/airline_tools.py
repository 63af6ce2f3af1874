"""Scoring side (it runs every action of an episode and replays gold with it; the agent side only names tools): the 14 airline tools, behaving exactly as upstream tau-bench's (spec: tau-bench-tools.md, 7-9).

Checks run in upstream's order and the first failure is returned; records are written only
through ``data.writable``/``data.insert`` (see :mod:`state`). Airline amounts are never
rounded, seat counts are never changed; quirks that are part of the contract are marked.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from qitos.benchmark.tau_bench.common_tools import Calculate, GetUserDetails, Think, Tool, TransferToHumanAgents, record_json
from qitos.benchmark.tau_bench.state import TauDb

AIRPORTS = {
    "SFO": "San Francisco", "JFK": "New York", "LAX": "Los Angeles", "ORD": "Chicago", "DFW": "Dallas",
    "DEN": "Denver", "SEA": "Seattle", "ATL": "Atlanta", "MIA": "Miami", "BOS": "Boston",
    "PHX": "Phoenix", "IAH": "Houston", "LAS": "Las Vegas", "MCO": "Orlando", "EWR": "Newark",
    "CLT": "Charlotte", "MSP": "Minneapolis", "DTW": "Detroit", "PHL": "Philadelphia", "LGA": "LaGuardia",
}  # fmt: skip
NEW_RESERVATION_IDS = ("HATHAT", "HATHAU", "HATHAV")
CERTIFICATE_NUMBERS = (3221322, 3221323, 3221324)
BOOKING_TIME = "2024-05-15T15:00:00"


def _quote_flight(flights: dict[str, Any], flight: dict[str, Any], cabin: Any, passengers: int) -> str | None:
    """Check one requested segment and write price/origin/destination onto it; or an error."""
    flight_number = flight["flight_number"]
    if flight_number not in flights:
        return f"Error: flight {flight_number} not found"
    dates = flights[flight_number]["dates"]
    if flight["date"] not in dates:
        return f"Error: flight {flight_number} not found on date {flight['date']}"
    info = dates[flight["date"]]
    if info["status"] != "available":
        return f"Error: flight {flight_number} not available on date {flight['date']}"
    if info["available_seats"][cabin] < passengers:
        return f"Error: not enough seats on flight {flight_number}"
    flight["price"] = info["prices"][cabin]
    flight["origin"] = flights[flight_number]["origin"]
    flight["destination"] = flights[flight_number]["destination"]
    return None


def _check_change_payment(method: dict[str, Any], amount: Any) -> str | None:
    """Payment checks shared by the two reservation-update tools (after the existence check)."""
    if method["source"] == "certificate":
        return "Error: certificate cannot be used to update reservation"
    if method["source"] == "gift_card" and method["amount"] < amount:
        return "Error: gift card balance is not enough"
    return None


def _flight_leg(flight: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
    leg = {key: value for key, value in flight.items() if key != "dates"}
    leg.update(info)
    return leg


class BookReservation(Tool):
    name = "book_reservation"

    @staticmethod
    def invoke(
        data: TauDb,
        user_id: str,
        origin: str,
        destination: str,
        flight_type: str,
        cabin: str,
        flights: list[dict[str, Any]],
        passengers: list[dict[str, Any]],
        payment_methods: list[dict[str, Any]],
        total_baggages: int,
        nonfree_baggages: int,
        insurance: str,
    ) -> str:
        if user_id not in data["users"]:
            return "Error: user not found"
        user = data.writable("users", user_id)
        reservations = data["reservations"]
        reservation_id = NEW_RESERVATION_IDS[0]
        if reservation_id in reservations:
            reservation_id = NEW_RESERVATION_IDS[1]
            if reservation_id in reservations:
                reservation_id = NEW_RESERVATION_IDS[2]  # quirk: a 4th booking overwrites it
        reservation = {
            "reservation_id": reservation_id,
            "user_id": user_id,
            "origin": origin,
            "destination": destination,
            "flight_type": flight_type,
            "cabin": cabin,
            "flights": copy.deepcopy(flights),
            "passengers": passengers,  # quirk: stored by reference, like the payments below
            "payment_history": payment_methods,
            "created_at": BOOKING_TIME,
            "total_baggages": total_baggages,
            "nonfree_baggages": nonfree_baggages,
            "insurance": insurance,
        }
        total = 0
        for flight in reservation["flights"]:
            error = _quote_flight(data["flights"], flight, cabin, len(passengers))
            if error:
                return error
            total += flight["price"] * len(passengers)
        if insurance == "yes":
            total += 30 * len(passengers)
        total += 50 * nonfree_baggages
        for payment in payment_methods:
            payment_id, amount = payment["payment_id"], payment["amount"]
            if payment_id not in user["payment_methods"]:
                return f"Error: payment method {payment_id} not found"
            method = user["payment_methods"][payment_id]
            if method["source"] in ("gift_card", "certificate") and method["amount"] < amount:
                return f"Error: not enough balance in payment method {payment_id}"
        paid = sum(payment["amount"] for payment in payment_methods)
        if paid != total:
            return f"Error: payment amount does not add up, total price is {total}, but paid {paid}"
        for payment in payment_methods:
            payment_id = payment["payment_id"]
            method = user["payment_methods"][payment_id]
            if method["source"] == "gift_card":
                method["amount"] -= payment["amount"]
            elif method["source"] == "certificate":
                del user["payment_methods"][payment_id]  # quirk: any remainder is lost
        data.insert("reservations", reservation_id, reservation)
        user["reservations"].append(reservation_id)
        return json.dumps(reservation)


class CancelReservation(Tool):
    name = "cancel_reservation"

    @staticmethod
    def invoke(data: TauDb, reservation_id: str) -> str:
        if reservation_id not in data["reservations"]:
            return "Error: reservation not found"
        reservation = data.writable("reservations", reservation_id)
        # quirk: no status check, so a second cancellation negates the refunds again
        refunds = [{"payment_id": p["payment_id"], "amount": -p["amount"]} for p in reservation["payment_history"]]
        reservation["payment_history"].extend(refunds)
        reservation["status"] = "cancelled"
        return json.dumps(reservation)


class GetReservationDetails(Tool):
    name = "get_reservation_details"

    @staticmethod
    def invoke(data: TauDb, reservation_id: str) -> str:
        return record_json(data["reservations"], reservation_id, "user")  # quirk: upstream's wording


class ListAllAirports(Tool):
    name = "list_all_airports"

    @staticmethod
    def invoke(data: TauDb) -> str:
        return json.dumps(AIRPORTS)


class SearchDirectFlight(Tool):
    name = "search_direct_flight"

    @staticmethod
    def invoke(data: TauDb, origin: str, destination: str, date: str) -> str:
        results = []
        for flight in data["flights"].values():
            if (
                flight["origin"] == origin
                and flight["destination"] == destination
                and date in flight["dates"]
                and flight["dates"][date]["status"] == "available"
            ):
                results.append(_flight_leg(flight, flight["dates"][date]))
        return json.dumps(results)


class SearchOnestopFlight(Tool):
    name = "search_onestop_flight"

    @staticmethod
    def invoke(data: TauDb, origin: str, destination: str, date: str) -> str:
        flights = data["flights"]
        results = []
        for first in flights.values():
            if first["origin"] != origin:
                continue
            for second in flights.values():
                if second["destination"] != destination or first["destination"] != second["origin"]:
                    continue
                arrival = first["scheduled_arrival_time_est"]
                # quirk: unpadded day, month hard-wired to May
                next_date = f"2024-05-{int(date[-2:]) + 1}" if "+1" in arrival else date
                if arrival > second["scheduled_departure_time_est"]:  # quirk: plain string comparison
                    continue
                if date not in first["dates"] or next_date not in second["dates"]:
                    continue
                if first["dates"][date]["status"] != "available" or second["dates"][next_date]["status"] != "available":
                    continue
                leg1 = _flight_leg(first, first["dates"][date])
                leg1["date"] = date
                leg2 = _flight_leg(second, second["dates"][date])  # quirk: info of the first leg's day
                leg2["date"] = next_date
                results.append([leg1, leg2])
        return json.dumps(results)


class SendCertificate(Tool):
    name = "send_certificate"

    @staticmethod
    def invoke(data: TauDb, user_id: str, amount: float) -> str | None:
        if user_id not in data["users"]:
            return "Error: user not found"
        methods = data["users"][user_id]["payment_methods"]
        for number in CERTIFICATE_NUMBERS:
            payment_id = f"certificate_{number}"
            if payment_id not in methods:
                data.writable("users", user_id)["payment_methods"][payment_id] = {
                    "source": "certificate",
                    "amount": amount,
                    "id": payment_id,
                }
                return f"Certificate {payment_id} added to user {user_id} with amount {amount}."
        return None  # quirk: all three used; the env raises InvalidObservationError


class UpdateReservationBaggages(Tool):
    name = "update_reservation_baggages"

    @staticmethod
    def invoke(data: TauDb, reservation_id: str, total_baggages: int, nonfree_baggages: int, payment_id: str) -> str:
        if reservation_id not in data["reservations"]:
            return "Error: reservation not found"
        reservation = data.writable("reservations", reservation_id)
        fee = 50 * max(0, nonfree_baggages - reservation["nonfree_baggages"])
        if payment_id not in data["users"][reservation["user_id"]]["payment_methods"]:
            return "Error: payment method not found"
        error = _check_change_payment(data["users"][reservation["user_id"]]["payment_methods"][payment_id], fee)
        if error:
            return error
        reservation["total_baggages"] = total_baggages
        reservation["nonfree_baggages"] = nonfree_baggages
        method = data.writable("users", reservation["user_id"])["payment_methods"][payment_id]
        if method["source"] == "gift_card":
            method["amount"] -= fee
        if fee != 0:
            reservation["payment_history"].append({"payment_id": payment_id, "amount": fee})
        return json.dumps(reservation)


class UpdateReservationFlights(Tool):
    name = "update_reservation_flights"

    @staticmethod
    def invoke(data: TauDb, reservation_id: str, cabin: str, flights: list[dict[str, Any]], payment_id: str) -> str:
        if reservation_id not in data["reservations"]:
            return "Error: reservation not found"
        reservation = data.writable("reservations", reservation_id)
        passengers = len(reservation["passengers"])
        new_flights = copy.deepcopy(flights)
        total = 0
        for flight in new_flights:
            kept = [
                old
                for old in reservation["flights"]
                if old["flight_number"] == flight["flight_number"]
                and old["date"] == flight["date"]
                and cabin == reservation["cabin"]  # quirk: the stored cabin is never updated
            ]
            if kept:
                flight["price"] = kept[0]["price"]  # the old price is kept, not re-quoted
                flight["origin"] = kept[0]["origin"]
                flight["destination"] = kept[0]["destination"]
            else:
                error = _quote_flight(data["flights"], flight, cabin, passengers)
                if error:
                    return error
            total += flight["price"] * passengers
        total -= sum(flight["price"] for flight in reservation["flights"]) * passengers
        if payment_id not in data["users"][reservation["user_id"]]["payment_methods"]:
            return "Error: payment method not found"
        error = _check_change_payment(data["users"][reservation["user_id"]]["payment_methods"][payment_id], total)
        if error:
            return error
        method = data.writable("users", reservation["user_id"])["payment_methods"][payment_id]
        if method["source"] == "gift_card":
            method["amount"] -= total
        reservation["flights"] = new_flights
        if total != 0:
            reservation["payment_history"].append({"payment_id": payment_id, "amount": total})
        return json.dumps(reservation)


class UpdateReservationPassengers(Tool):
    name = "update_reservation_passengers"

    @staticmethod
    def invoke(data: TauDb, reservation_id: str, passengers: list[dict[str, Any]]) -> str:
        if reservation_id not in data["reservations"]:
            return "Error: reservation not found"
        reservation = data.writable("reservations", reservation_id)
        if len(passengers) != len(reservation["passengers"]):
            return "Error: number of passengers does not match"
        reservation["passengers"] = passengers
        return json.dumps(reservation)


# Registry order = upstream's tools_info order.
AIRLINE_TOOLS: tuple[type[Tool], ...] = (
    BookReservation,
    Calculate,
    CancelReservation,
    GetReservationDetails,
    GetUserDetails,
    ListAllAirports,
    SearchDirectFlight,
    SearchOnestopFlight,
    SendCertificate,
    Think,
    TransferToHumanAgents,
    UpdateReservationBaggages,
    UpdateReservationFlights,
    UpdateReservationPassengers,
)
