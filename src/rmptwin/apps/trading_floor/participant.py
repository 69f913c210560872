"""A participant of the floor (seed 7.3: "all of the participants may enter buy, sell or stop
orders and must see all of the orders"): an S_P through which it enters its orders, and a
receiver of the ring (an R_S without a secondary ring: it NACKs its assigned R_P) from
whose delivered sequence it derives the trades itself.

Its orders come from ``workload.order_schedule``, given at construction; the core publishes
each when its time comes (its own timer), so no driver needs to know about orders.
"""

from __future__ import annotations

from rmptwin.apps.trading_floor.floor_node import FloorNode
from rmptwin.apps.trading_floor.messages import Order
from rmptwin.apps.trading_floor.state import FloorState
from rmptwin.rmp.secondary import SecondaryCore
from rmptwin.rmp.source import SourceCore


class ParticipantCore(FloorNode):
    def __init__(self, receiver: SecondaryCore, source: SourceCore, stripe: int, floor: FloorState,
                 orders: list[tuple[int, Order]], recovering: bool = False) -> None:
        super().__init__(receiver.name, receiver, source, stripe, floor)
        self.orders = sorted(orders, key=lambda o: o[0])
        self.next_order = 0
        # a restarted participant does not enter the orders it would have entered while down
        self._skip_past = recovering

    def own_timer(self) -> int | None:
        return self.orders[self.next_order][0] if self.next_order < len(self.orders) else None

    def on_own_timer(self, now: int) -> None:
        if self._skip_past:
            self._skip_past = False
            self.skip_orders_before(now)
        while self.next_order < len(self.orders) and self.orders[self.next_order][0] <= now:
            self.publish(self.orders[self.next_order][1], now)
            self.next_order += 1

    def skip_orders_before(self, now: int) -> None:
        while self.next_order < len(self.orders) and self.orders[self.next_order][0] < now:
            self.next_order += 1
