#!/usr/bin/python3
"""Modbus test server on pymodbus (Debian python3-pymodbus 3.0).

Used by the adapter's integration tests and benchmarks; run it with
/usr/bin/python3, the interpreter python3-pymodbus is installed for.

  server.py --port 5020 --layout layout.json [--stats stats.json]
  server.py --port 5020 --units 10 --registers 100
  server.py --serial /dev/pts/7 --baudrate 9600 --parity E --layout layout.json

Register layout (--layout), all addresses zero-based, values raw 16-bit
registers or 0/1 bits:

  {"units": {"1": {"hr": {"0": 4660}, "ir": {...}, "co": {"3": 1}, "di": {...}}},
   "busy":  [{"unit": 1, "area": "hr", "start": 500, "count": 10}]}

Every area of a unit in the layout spans the full 0..65535. A request that
touches a "busy" range is answered with exception 6 (slave device busy).

--units N --registers M (no layout) makes units 1..N, each with M holding
and M input registers holding unit*1000+index and M coils and discrete
inputs holding index%2; reads beyond M get exception 2.

--stats FILE is rewritten after every request with
{"requests": n, "byFunction": {"3": n}, "byUnit": {"1": n}}, so a test can
count the requests the server really saw. Both options combine.
"""

import argparse
import asyncio
import json
import logging
import os
import sys

from pymodbus.bit_read_message import ReadCoilsRequest, ReadDiscreteInputsRequest
from pymodbus.bit_write_message import WriteMultipleCoilsRequest, WriteSingleCoilRequest
from pymodbus.datastore import ModbusSequentialDataBlock, ModbusServerContext, ModbusSlaveContext
from pymodbus.pdu import ModbusExceptions
from pymodbus.register_read_message import ReadHoldingRegistersRequest, ReadInputRegistersRequest
from pymodbus.register_write_message import WriteMultipleRegistersRequest, WriteSingleRegisterRequest
from pymodbus.server import StartAsyncSerialServer, StartAsyncTcpServer
from pymodbus.transaction import ModbusRtuFramer

AREAS = ("hr", "ir", "co", "di")
REQUESTS = {
    ReadHoldingRegistersRequest: "hr",
    ReadInputRegistersRequest: "ir",
    ReadCoilsRequest: "co",
    ReadDiscreteInputsRequest: "di",
    WriteSingleRegisterRequest: "hr",
    WriteMultipleRegistersRequest: "hr",
    WriteSingleCoilRequest: "co",
    WriteMultipleCoilsRequest: "co",
}


class Stats:
    def __init__(self, path):
        self.path = path
        self.requests = 0
        self.by_function = {}
        self.by_unit = {}

    def count(self, unit, function):
        self.requests += 1
        self.by_function[str(function)] = self.by_function.get(str(function), 0) + 1
        self.by_unit[str(unit)] = self.by_unit.get(str(unit), 0) + 1
        if not self.path:
            return
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"requests": self.requests, "byFunction": self.by_function, "byUnit": self.by_unit}, f)
        os.replace(tmp, self.path)


def request_count(req):
    if hasattr(req, "count"):
        return req.count
    values = getattr(req, "values", None)
    if isinstance(values, list):
        return len(values)
    return 1


def instrument(stats, busy):
    """Wrap the execute method of the request classes: count each request
    and answer exception 6 for the busy ranges."""
    for cls, area in REQUESTS.items():
        def make(orig, area):
            def execute(self, context):
                stats.count(self.unit_id, self.function_code)
                lo, hi = self.address, self.address + request_count(self)
                for b in busy:
                    if b["unit"] == self.unit_id and b["area"] == area and lo < b["start"] + b["count"] and b["start"] < hi:
                        return self.doException(ModbusExceptions.SlaveBusy)
                return orig(self, context)
            return execute
        cls.execute = make(cls.execute, area)


def build_context(args):
    slaves = {}
    if args.units:
        for unit in range(1, args.units + 1):
            regs = [(unit * 1000 + i) & 0xFFFF for i in range(args.registers)]
            bits = [i % 2 for i in range(args.registers)]
            slaves[unit] = ModbusSlaveContext(
                hr=ModbusSequentialDataBlock(0, list(regs)),
                ir=ModbusSequentialDataBlock(0, list(regs)),
                co=ModbusSequentialDataBlock(0, list(bits)),
                di=ModbusSequentialDataBlock(0, list(bits)),
                zero_mode=True,
            )
    busy = []
    if args.layout:
        with open(args.layout) as f:
            layout = json.load(f)
        for unit, areas in layout.get("units", {}).items():
            blocks = {a: ModbusSequentialDataBlock(0, [0] * 65536) for a in AREAS}
            for area, values in areas.items():
                if area not in blocks:
                    sys.exit(f"unknown area {area!r}; want one of {AREAS}")
                for addr, value in values.items():
                    blocks[area].setValues(int(addr), [int(value)])
            slaves[int(unit)] = ModbusSlaveContext(zero_mode=True, **blocks)
        busy = layout.get("busy", [])
    if not slaves:
        sys.exit("nothing to serve: give --layout or --units")
    return ModbusServerContext(slaves=slaves, single=False), busy


async def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=5020)
    p.add_argument("--layout", help="register layout JSON file")
    p.add_argument("--units", type=int, default=0, help="generate units 1..N")
    p.add_argument("--registers", type=int, default=100, help="registers per generated unit")
    p.add_argument("--stats", help="file rewritten with request counts after every request")
    p.add_argument("--serial", help="serve Modbus RTU on this serial device instead of TCP")
    p.add_argument("--baudrate", type=int, default=9600)
    p.add_argument("--parity", default="E")
    p.add_argument("--stopbits", type=int, default=1)
    args = p.parse_args()
    # pymodbus logs every closed client connection as an error.
    logging.basicConfig(level=logging.CRITICAL)
    logging.getLogger("pymodbus").setLevel(logging.CRITICAL)

    context, busy = build_context(args)
    instrument(Stats(args.stats), busy)
    if args.serial:
        await StartAsyncSerialServer(
            context, framer=ModbusRtuFramer, port=args.serial,
            baudrate=args.baudrate, parity=args.parity, stopbits=args.stopbits, bytesize=8)
    else:
        await StartAsyncTcpServer(context, address=(args.host, args.port), allow_reuse_address=True)


if __name__ == "__main__":
    asyncio.run(main())
