-- rmptwin's wire formats for Wireshark / tshark (Lua API, Wireshark >= 3.6).
--
--   wireshark -X lua_script:wireshark/rmp.lua capture.pcap
--   tshark -X lua_script:wireshark/rmp.lua -r capture.pcap -V
--   (or copy this file into ~/.local/lib/wireshark/plugins/)
--
-- Two protocols (filter names rmptwin and rmptwin_venue: "rmp" is HP's Remote Maintenance
-- Protocol in Wireshark), both on UDP port 7400 (rmptwin.core.groups.RMP_PORT, the stripes' global
-- groups and unicast control) and found by heuristic on any other UDP port:
--
--   rmptwin        RMP frames (src/rmptwin/rmp/wire.py): magic 0xA5, version 2, type, body
--                  length (u16), body; control frames (every type but DATA) may carry a 16-byte
--                  HMAC-SHA256 tag after the body (rmp/seal.py, security on): "MAC present".
--   rmptwin_venue  exchange-venue frames (src/rmptwin/venue/wire.py): version 1, type, body
--                  length (u32), body.
--
-- MoldUDP64 (customers' remulticast on 7500, re-requests on 7600) is Wireshark's own
-- moldudp64 dissector, which has no handle a script can call: add
-- ``-d udp.port==7500,moldudp64 -d udp.port==7600,moldudp64`` (or Decode As... in Wireshark).
--
-- Field names follow the seed ("RMP for the Internet stock market") and the project's
-- dataclasses (rmp/frames.py): stripe, epoch, token (t), src and src_seq (M_s), gseq, the
-- acknowledged gseq range of an ACK (first_gseq..last_gseq), NACK ranges (lo..hi).
-- Numbers are big-endian; names are u8-length-prefixed UTF-8. A frame the project's own
-- decoder would reject gets an expert error (group Malformed) saying why.

local RMP_PORT = 7400
local MAGIC, VERSION, MAC_BYTES = 0xA5, 2, 16

local rmp = Proto("rmptwin", "Reliable Multicast Protocol (rmptwin RMP)")
local venue = Proto("rmptwin_venue", "rmptwin exchange venue")

-- ------------------------------------------------------------------------------- RMP fields
local TYPES = {
    [1] = "DATA", [2] = "ACK", [3] = "NULL_TOKEN", [4] = "NACK", [5] = "RETX", [6] = "REPORT",
    [7] = "REPORT_ACK", [8] = "INVITE", [9] = "JOIN", [10] = "JOIN_ACK", [11] = "NEW_RING",
    [12] = "SEC_TOKEN",
}
local WANTS = { [1] = "acks (token numbers lo..hi)", [2] = "messages of src, M_s lo..hi",
                [3] = "acks of src's messages lo..hi" }
local REASONS = { [1] = "no acknowledgement", [2] = "token lost", [3] = "no answer",
                  [4] = "missing token", [5] = "secondary ring", [6] = "join request" }
local YESNO = { [0] = "no", [1] = "yes" }

local F = {}
local function field(key, ctor, name, ...)
    F[key] = ctor("rmptwin." .. key, name, ...)
end
field("magic", ProtoField.uint8, "Magic", base.HEX)
field("version", ProtoField.uint8, "Version", base.DEC)
field("type", ProtoField.uint8, "Type", base.DEC, TYPES)
field("length", ProtoField.uint16, "Body length", base.DEC)
field("stripe", ProtoField.uint16, "Stripe", base.DEC)
field("epoch", ProtoField.uint32, "Epoch (ring)", base.DEC)
field("src", ProtoField.string, "Source (S_P)")
field("src_seq", ProtoField.int64, "Source sequence number (M_s)", base.DEC)
field("acked_below", ProtoField.int64, "Acked below (every M_s < it acknowledged)", base.DEC)
field("payload", ProtoField.bytes, "Payload")
field("token", ProtoField.int64, "Token (t)", base.DEC)
field("first_gseq", ProtoField.int64, "First gseq acknowledged", base.DEC)
field("last_gseq", ProtoField.int64, "Last gseq acknowledged", base.DEC)
field("ts_ns", ProtoField.int64, "Timestamp (ns)", base.DEC)
field("stable", ProtoField.int64, "Stable (acks held by every member up to)", base.DEC)
field("token_site", ProtoField.string, "Token site")
field("next_site", ProtoField.string, "Next token site")
field("msg_count", ProtoField.uint16, "Messages acknowledged", base.DEC)
field("msg.src", ProtoField.string, "Source")
field("msg.src_seq", ProtoField.int64, "M_s", base.DEC)
field("msg.gseq", ProtoField.int64, "gseq", base.DEC)
field("requester", ProtoField.string, "Requester")
field("want", ProtoField.uint8, "Wants", base.DEC, WANTS)
field("lo", ProtoField.int64, "Range from", base.DEC)
field("hi", ProtoField.int64, "Range to", base.DEC)
field("reporter", ProtoField.string, "Reporter")
field("suspect", ProtoField.string, "Suspect")
field("reason", ProtoField.uint8, "Reason", base.DEC, REASONS)
field("ring", ProtoField.string, "Secondary ring")
field("reformer", ProtoField.string, "Reformation server")
field("member", ProtoField.string, "Member")
field("have", ProtoField.int64, "Have (last ack held with all its messages)", base.DEC)
field("next_gseq", ProtoField.int64, "Next gseq", base.DEC)
field("recovering", ProtoField.uint8, "Recovering", base.DEC, YESNO)
field("have_epoch", ProtoField.uint32, "Epoch of ack 'have'", base.DEC)
field("start_t", ProtoField.int64, "Start token", base.DEC)
field("last_t", ProtoField.int64, "Last token of the old ring", base.DEC)
field("recovery_site", ProtoField.string, "Recovery site")
field("member_count", ProtoField.uint16, "Members", base.DEC)
field("members", ProtoField.string, "Ring member")
field("lineage_count", ProtoField.uint16, "Lineage entries", base.DEC)
field("lineage.epoch", ProtoField.uint32, "Ring epoch", base.DEC)
field("lineage.first_token", ProtoField.int64, "First token it issued", base.DEC)
field("holder", ProtoField.string, "Holder")
field("next_holder", ProtoField.string, "Next holder")
field("round", ProtoField.int64, "Round", base.DEC)
field("mac_present", ProtoField.uint8, "MAC present", base.DEC, YESNO)
field("mac", ProtoField.bytes, "MAC (HMAC-SHA256, truncated)")
local fields = {}
for _, f in pairs(F) do fields[#fields + 1] = f end
rmp.fields = fields

local E = {
    truncated = ProtoExpert.new("rmptwin.truncated", "RMP frame truncated", expert.group.MALFORMED, expert.severity.ERROR),
    length = ProtoExpert.new("rmptwin.bad_length", "RMP frame length does not match its header", expert.group.MALFORMED, expert.severity.ERROR),
    field = ProtoExpert.new("rmptwin.bad_field", "RMP field out of range", expert.group.MALFORMED, expert.severity.ERROR),
    version = ProtoExpert.new("rmptwin.bad_version", "Unknown RMP version", expert.group.MALFORMED, expert.severity.ERROR),
    type = ProtoExpert.new("rmptwin.unknown_type", "Unknown RMP frame type", expert.group.MALFORMED, expert.severity.ERROR),
}
rmp.experts = { E.truncated, E.length, E.field, E.version, E.type }

-- ------------------------------------------------------------------------------- reader
-- Reads [off, stop) of a buffer, adding each field it reads to ``tree``; running past
-- ``stop`` raises {truncated = offset}, which the dissector turns into an expert error.
local Reader = {}
Reader.__index = Reader

local function reader(buf, off, stop, tree)
    return setmetatable({ buf = buf, off = off, stop = stop, tree = tree }, Reader)
end

function Reader:need(n)
    if self.off + n > self.stop then error({ truncated = self.off, need = n }, 0) end
end

function Reader:num(f, n, signed)
    self:need(n)
    local r = self.buf(self.off, n)
    local v
    if n == 8 then v = r:int64() elseif signed then v = r:int() else v = r:uint() end
    if f then self.tree:add(f, r) end
    self.off = self.off + n
    return v
end

function Reader:u8(f) return self:num(f, 1) end
function Reader:u16(f) return self:num(f, 2) end
function Reader:u32(f) return self:num(f, 4) end
function Reader:i64(f) return self:num(f, 8) end

function Reader:text(f, tree)
    self:need(1)
    local n = self.buf(self.off, 1):uint()
    self:need(1 + n)
    local s = n > 0 and self.buf(self.off + 1, n):string(ENC_UTF_8) or ""
    if f then (tree or self.tree):add(f, self.buf(self.off, 1 + n), s) end
    self.off = self.off + 1 + n
    return s
end

local function bad(msg) error({ bad = msg }, 0) end

-- ------------------------------------------------------------------------------- RMP bodies
local body = {}

body[1] = function(r)   -- DATA
    local stripe = r:u16(F.stripe)
    local src = r:text(F.src)
    local seq = r:i64(F.src_seq)
    r:i64(F.acked_below)
    local n = r.stop - r.off
    if n > 0 then r.tree:add(F.payload, r.buf(r.off, n)) end
    r.off = r.stop
    return string.format("stripe %d %s M_s=%s (%d bytes)", stripe, src, tostring(seq), n)
end

local function ack(r, _, code)
    local stripe = r:u16(F.stripe)
    local epoch = r:u32(F.epoch)
    local t = r:i64(F.token)
    local first = r:i64(F.first_gseq)
    r:i64(F.ts_ns)
    r:i64(F.stable)
    local site = r:text(F.token_site)
    local nxt = r:text(F.next_site)
    local n = r:u16(F.msg_count)
    if (n == 0) ~= (code == 3) then bad("ACK must carry messages and NULL_TOKEN none") end
    r.tree:add(F.last_gseq, first + n - 1):set_generated()
    local list = r.tree
    if n > 0 then list = r.tree:add(r.buf(r.off, r.stop - r.off), string.format("Acknowledged messages (%d)", n)) end
    for i = 1, n do
        local start = r.off
        local item = list:add(r.buf(start, 1), "Message")
        local src = r:text(F["msg.src"], item)
        r:need(8)
        item:add(F["msg.src_seq"], r.buf(r.off, 8))
        local seq = r.buf(r.off, 8):int64()
        r.off = r.off + 8
        local g = first + (i - 1)
        item:add(F["msg.gseq"], g):set_generated()
        item:set_len(r.off - start)
        item:set_text(string.format("Message %d: %s M_s=%s -> gseq %s", i, src, tostring(seq), tostring(g)))
    end
    local acked = n > 0 and string.format(", acks gseq %s..%s", tostring(first), tostring(first + n - 1)) or ""
    return string.format("t=%s stripe %d epoch %d %s -> %s%s", tostring(t), stripe, epoch, site, nxt, acked)
end
body[2] = ack
body[3] = ack

body[4] = function(r)   -- NACK
    local stripe = r:u16(F.stripe)
    r:u32(F.epoch)
    local who = r:text(F.requester)
    local want = r:u8(F.want)
    local lo = r:i64(F.lo)
    local hi = r:i64(F.hi)
    local src = r:text(F.src)
    if not WANTS[want] then bad("NACK asks for unknown kind " .. want) end
    if hi < lo then bad("NACK range is empty (hi < lo)") end
    local what = want == 1 and "acks" or (want == 2 and ("msgs of " .. src) or ("acks of " .. src))
    return string.format("stripe %d %s wants %s %s..%s", stripe, who, what, tostring(lo), tostring(hi))
end

body[6] = function(r)   -- REPORT
    local stripe = r:u16(F.stripe)
    r:u32(F.epoch)
    local who = r:text(F.reporter)
    local suspect = r:text(F.suspect)
    local reason = r:u8(F.reason)
    local t = r:i64(F.token)
    r:text(F.ring)
    if not REASONS[reason] then bad("REPORT has unknown reason " .. reason) end
    return string.format("stripe %d %s reports %s: %s (t=%s)", stripe, who, suspect, REASONS[reason], tostring(t))
end

body[7] = function(r)   -- REPORT_ACK
    local stripe = r:u16(F.stripe)
    r:u32(F.epoch)
    return string.format("stripe %d to %s", stripe, r:text(F.reporter))
end

body[8] = function(r)   -- INVITE
    local stripe = r:u16(F.stripe)
    local epoch = r:u32(F.epoch)
    return string.format("stripe %d epoch %d from %s", stripe, epoch, r:text(F.reformer))
end

body[9] = function(r)   -- JOIN
    local stripe = r:u16(F.stripe)
    local epoch = r:u32(F.epoch)
    local member = r:text(F.member)
    local have = r:i64(F.have)
    r:i64(F.next_gseq)
    local flag = r:u8(F.recovering)
    r:u32(F.have_epoch)
    if flag > 1 then bad("JOIN recovering flag must be 0 or 1") end
    return string.format("stripe %d epoch %d %s has t=%s%s", stripe, epoch, member, tostring(have),
                         flag == 1 and " (recovering)" or "")
end

body[10] = function(r)  -- JOIN_ACK
    local stripe = r:u16(F.stripe)
    local epoch = r:u32(F.epoch)
    return string.format("stripe %d epoch %d %s", stripe, epoch, r:text(F.member))
end

body[11] = function(r)  -- NEW_RING
    local stripe = r:u16(F.stripe)
    local epoch = r:u32(F.epoch)
    r:i64(F.start_t)
    local last = r:i64(F.last_t)
    r:i64(F.next_gseq)
    r:i64(F.ts_ns)
    local site = r:text(F.token_site)
    r:text(F.recovery_site)
    local n = r:u16(F.member_count)
    local names = {}
    for i = 1, n do names[i] = r:text(F.members) end
    local k = r:u16(F.lineage_count)
    local prev
    for _ = 1, k do
        local start = r.off
        local item = r.tree:add(r.buf(start, 1), "Lineage")
        r:need(12)
        item:add(F["lineage.epoch"], r.buf(r.off, 4))
        item:add(F["lineage.first_token"], r.buf(r.off + 4, 8))
        local e, first = r.buf(r.off, 4):uint(), r.buf(r.off + 4, 8):int64()
        r.off = r.off + 12
        item:set_len(12)
        item:set_text(string.format("Lineage: epoch %d from t=%s", e, tostring(first)))
        if prev and first <= prev then bad("NEW_RING lineage is not in token order") end
        prev = first
    end
    if n == 0 then bad("NEW_RING has no members") end
    return string.format("stripe %d epoch %d after t=%s, token site %s, members %s", stripe, epoch,
                         tostring(last), site, table.concat(names, ","))
end

body[12] = function(r)  -- SEC_TOKEN
    local stripe = r:u16(F.stripe)
    r:u32(F.epoch)
    local ring = r:text(F.ring)
    local t = r:i64(F.token)
    local holder = r:text(F.holder)
    local nxt = r:text(F.next_holder)
    r:i64(F.round)
    return string.format("stripe %d ring %s t=%s %s -> %s", stripe, ring, tostring(t), holder, nxt)
end

-- One frame at [off, off + 5 + length) of buf, under ``parent``; ``depth`` 1 inside a RETX.
-- Returns the frame's type name and a one-line summary; raises on a malformed frame.
local dissect_frame

body[5] = function(r, depth)   -- RETX
    local stripe = r:u16(F.stripe)
    if depth > 0 then bad("RETX inside RETX") end
    local sub = r.tree:add(r.buf(r.off, r.stop - r.off), "Retransmitted frame")
    local name, info = dissect_frame(r.buf, r.off, r.stop, sub, depth + 1)
    if name ~= "DATA" and name ~= "ACK" and name ~= "NULL_TOKEN" then
        bad("RETX carries " .. name .. ", expected DATA or ACK")
    end
    r.off = r.stop
    return string.format("stripe %d of %s %s", stripe, name, info)
end

dissect_frame = function(buf, off, stop, tree, depth)
    local r = reader(buf, off, stop, tree)
    r:need(5)
    local magic = r:u8(F.magic)
    if magic ~= MAGIC then bad(string.format("first byte 0x%02x is not the RMP magic", magic)) end
    local version = r:u8(F.version)
    if version ~= VERSION then error({ version = version }, 0) end
    local code = r:u8(F.type)
    local length = r:u16(F.length)
    local name = TYPES[code]
    if not name then error({ type = code }, 0) end
    tree:append_text(", " .. name)
    if off + 5 + length ~= stop then
        error({ length = string.format("%s header says %d body bytes, frame has %d", name, length, stop - off - 5) }, 0)
    end
    local info = body[code](r, depth, code)
    if r.off ~= stop then error({ length = string.format("%s frame has %d stray bytes", name, stop - r.off) }, 0) end
    return name, info
end

local function expert_for(item, err)
    if type(err) ~= "table" then
        item:add_proto_expert_info(E.field, "dissector error: " .. tostring(err))
    elseif err.truncated then
        item:add_proto_expert_info(E.truncated, string.format("truncated at byte %d (needs %d more)", err.truncated, err.need))
    elseif err.version then
        item:add_proto_expert_info(E.version, string.format("RMP version %d, expected %d", err.version, VERSION))
    elseif err.type then
        item:add_proto_expert_info(E.type, "unknown RMP frame type " .. err.type)
    elseif err.length then
        item:add_proto_expert_info(E.length, err.length)
    else
        item:add_proto_expert_info(E.field, err.bad)
    end
end

function rmp.dissector(buf, pinfo, tree)
    local len = buf:len()
    if len < 5 or buf(0, 1):uint() ~= MAGIC then return 0 end
    pinfo.cols.protocol = "RMP"
    local item = tree:add(rmp, buf(0, len))
    -- A control frame with security on carries a 16-byte MAC after its body.
    local length = buf(3, 2):uint()
    local stop = len
    local mac = len == 5 + length + MAC_BYTES and buf(2, 1):uint() ~= 1
    if mac then stop = len - MAC_BYTES end
    local ok, name, info = pcall(dissect_frame, buf, 0, stop, item, 0)
    item:add(F.mac_present, mac and 1 or 0):set_generated()
    if mac then item:add(F.mac, buf(stop, MAC_BYTES)) end
    if ok then
        pinfo.cols.info = name .. " " .. info .. (mac and " [MAC]" or "")
    else
        pinfo.cols.info = "RMP [Malformed]"
        expert_for(item, name)
    end
    return len
end

-- ------------------------------------------------------------------------------- venue
local VTYPES = {
    [1] = "ORDER", [2] = "ORDER_ACK", [3] = "REQUEST", [4] = "PROPOSE", [5] = "DECIDE", [6] = "STORE",
    [7] = "HARDENED", [8] = "COMPLETE", [9] = "DONE", [10] = "CKPT_STORE", [11] = "CKPT_REQ",
    [12] = "CKPT_PART", [13] = "HARDENED_REQ", [14] = "RESEND_REQ",
}
local V = {}
local function vfield(key, ctor, name, ...)
    V[key] = ctor("rmptwin_venue." .. key, name, ...)
end
vfield("version", ProtoField.uint8, "Version", base.DEC)
vfield("type", ProtoField.uint8, "Type", base.DEC, VTYPES)
vfield("length", ProtoField.uint32, "Body length", base.DEC)
vfield("client_seq", ProtoField.int64, "Client sequence number", base.DEC)
vfield("t_ns", ProtoField.int64, "Time (ns)", base.DEC)
vfield("status", ProtoField.uint8, "Status", base.DEC)
vfield("gw", ProtoField.uint16, "Gateway", base.DEC)
vfield("gw_seq", ProtoField.int64, "Gateway sequence number", base.DEC)
vfield("reason", ProtoField.string, "Reason")
vfield("ev", ProtoField.uint16, "Execution venue", base.DEC)
vfield("n", ProtoField.int64, "Position", base.DEC)
vfield("next", ProtoField.int64, "Next position", base.DEC)
vfield("count", ProtoField.uint16, "Count", base.DEC)
vfield("trade_count", ProtoField.uint16, "Trades", base.DEC)
vfield("upto", ProtoField.int64, "Hardened up to", base.DEC)
vfield("seq", ProtoField.int64, "Sequence number", base.DEC)
vfield("trades", ProtoField.uint16, "Trades", base.DEC)
vfield("part", ProtoField.uint16, "Part", base.DEC)
vfield("parts", ProtoField.uint16, "Parts", base.DEC)
vfield("data", ProtoField.bytes, "Checkpoint data")
vfield("first", ProtoField.int64, "First", base.DEC)
vfield("last", ProtoField.int64, "Last", base.DEC)
vfield("order.action", ProtoField.uint8, "Action", base.DEC, { [0] = "new", [1] = "cancel", [2] = "replace" })
vfield("order.kind", ProtoField.uint8, "Kind", base.DEC)
vfield("order.side", ProtoField.uint8, "Side", base.DEC)
vfield("order.symbol", ProtoField.string, "Symbol")
vfield("order.oid", ProtoField.int64, "Order id", base.DEC)
vfield("order.qty", ProtoField.int64, "Quantity", base.DEC)
vfield("order.price", ProtoField.int64, "Price (x 10,000)", base.DEC)
vfield("order.spare", ProtoField.int64, "Spare", base.DEC)
vfield("trade.taker", ProtoField.int64, "Taker", base.DEC)
vfield("trade.maker", ProtoField.int64, "Maker", base.DEC)
vfield("trade.price", ProtoField.int64, "Price", base.DEC)
vfield("trade.qty", ProtoField.int64, "Quantity", base.DEC)
vfield("trade.taker_side", ProtoField.uint8, "Taker side", base.DEC)
local vfields = {}
for _, f in pairs(V) do vfields[#vfields + 1] = f end
venue.fields = vfields
local VE = ProtoExpert.new("rmptwin_venue.malformed", "Malformed venue frame", expert.group.MALFORMED, expert.severity.ERROR)
venue.experts = { VE }

local function order(r)
    local t = r.tree
    r.tree = t:add(r.buf(r.off, math.max(1, math.min(43, r.stop - r.off))), "Order")
    r:u8(V["order.action"])
    r:u8(V["order.kind"])
    r:u8(V["order.side"])
    r:need(8)
    local sym = r.buf(r.off, 8):string():gsub(" +$", "")
    r.tree:add(V["order.symbol"], r.buf(r.off, 8), sym)
    r.off = r.off + 8
    local oid = r:i64(V["order.oid"])
    r:i64(V["order.qty"])
    r:i64(V["order.price"])
    r:i64(V["order.spare"])
    r.tree:set_text(string.format("Order %s %s", sym, tostring(oid)))
    r.tree = t
    return sym
end

local function request(r)
    local gw = r:u16(V.gw)
    local seq = r:i64(V.gw_seq)
    r:i64(V.t_ns)
    order(r)
    return string.format("gw %d #%s", gw, tostring(seq))
end

local function keys(r, count)
    for _ = 1, count do
        r:u16(V.gw)
        r:i64(V.gw_seq)
    end
end

local vbody = {}
vbody[1] = function(r) local s = r:i64(V.client_seq); r:i64(V.t_ns); return "client #" .. tostring(s) .. " " .. order(r) end
vbody[2] = function(r)
    local s = r:i64(V.client_seq)
    r:u8(V.status)
    r:i64(V.gw_seq)
    local n = r:u16()
    r:need(n)
    r.tree:add(V.reason, r.buf(r.off - 2, 2 + n), n > 0 and r.buf(r.off, n):string(ENC_UTF_8) or "")
    r.off = r.off + n
    return "client #" .. tostring(s)
end
vbody[3] = request
vbody[4] = function(r) local ev = r:u16(V.ev); local n = r:i64(V.n); keys(r, r:u16(V.count)); return string.format("ev %d n=%s", ev, tostring(n)) end
vbody[5] = function(r)
    local st = r:u8(V.status)
    local n = r:i64(V.n)
    r:i64(V.next)
    keys(r, r:u16(V.count))
    if st > 2 then error({ bad = "DECIDE status " .. st .. " is unknown" }, 0) end
    return string.format("n=%s status %d", tostring(n), st)
end
vbody[6] = function(r)
    local ev = r:u16(V.ev)
    local count = r:u16(V.count)
    for _ = 1, count do
        r:i64(V.n)
        local ntr = r:u16(V.trade_count)
        request(r)
        for _ = 1, ntr do
            r:i64(V["trade.taker"]); r:i64(V["trade.maker"]); r:i64(V["trade.price"]); r:i64(V["trade.qty"])
            r:u8(V["trade.taker_side"])
        end
    end
    return string.format("ev %d, %d entries", ev, count)
end
vbody[7] = function(r)
    local upto = r:i64(V.upto)
    local count = r:u16(V.count)
    for _ = 1, count do r:i64(V.n); request(r) end
    return string.format("up to %s, %d entries", tostring(upto), count)
end
vbody[8] = function(r) local s = r:i64(V.seq); local n = r:i64(V.n); r:u16(V.trades); return string.format("#%s n=%s", tostring(s), tostring(n)) end
vbody[9] = vbody[8]
vbody[10] = function(r)
    local n = r:i64(V.n)
    local part = r:u16(V.part)
    local parts = r:u16(V.parts)
    if part >= math.max(parts, 1) then error({ bad = string.format("checkpoint part %d of %d", part, parts) }, 0) end
    if r.stop > r.off then r.tree:add(V.data, r.buf(r.off, r.stop - r.off)) end
    r.off = r.stop
    return string.format("n=%s part %d/%d", tostring(n), part, parts)
end
vbody[12] = vbody[10]
vbody[11] = function(r) return "ev " .. r:u16(V.ev) end
vbody[13] = function(r) local a = r:i64(V.first); local b = r:i64(V.last); return tostring(a) .. ".." .. tostring(b) end
vbody[14] = vbody[13]

function venue.dissector(buf, pinfo, tree)
    local len = buf:len()
    if len < 6 or buf(0, 1):uint() ~= 1 or not VTYPES[buf(1, 1):uint()] then return 0 end
    pinfo.cols.protocol = "RMPVENUE"
    local item = tree:add(venue, buf(0, len))
    local r = reader(buf, 0, len, item)
    r:u8(V.version)
    local code = r:u8(V.type)
    local length = r:u32(V.length)
    local name = VTYPES[code]
    item:append_text(", " .. name)
    local ok, info = pcall(function()
        if length ~= len - 6 then error({ bad = string.format("%s frame says %d bytes, carries %d", name, length, len - 6) }, 0) end
        local s = vbody[code](r)
        if r.off ~= len then error({ bad = string.format("%s frame has %d trailing bytes", name, len - r.off) }, 0) end
        return s
    end)
    if ok then
        pinfo.cols.info = name .. " " .. info
    else
        pinfo.cols.info = name .. " [Malformed]"
        local msg = type(info) == "table" and (info.bad or string.format("truncated at byte %d", info.truncated or -1)) or tostring(info)
        item:add_proto_expert_info(VE, msg)
    end
    return len
end

-- ------------------------------------------------------------------------------- registration
-- Port 7400 carries RMP and venue frames (rmptwin.node.driver sends both there): told
-- apart by the first byte (0xA5 vs the venue's version 1).
local port = Proto("rmptwin_port", "rmptwin UDP port 7400 (RMP or venue)")
function port.dissector(buf, pinfo, tree)
    if buf:len() > 0 and buf(0, 1):uint() == MAGIC then return rmp.dissector(buf, pinfo, tree) end
    local n = venue.dissector(buf, pinfo, tree)
    if n > 0 then return n end
    return Dissector.get("data"):call(buf, pinfo, tree)
end

local udp = DissectorTable.get("udp.port")
udp:add(RMP_PORT, port)

-- Heuristics for captures on other ports: a header that checks out exactly.
local function rmp_heuristic(buf, pinfo, tree)
    local len = buf:len()
    if len < 5 or buf(0, 1):uint() ~= MAGIC or buf(1, 1):uint() ~= VERSION or not TYPES[buf(2, 1):uint()] then
        return false
    end
    local body_len = buf(3, 2):uint()
    if len ~= 5 + body_len and len ~= 5 + body_len + MAC_BYTES then return false end
    rmp.dissector(buf, pinfo, tree)
    return true
end

local function venue_heuristic(buf, pinfo, tree)
    local len = buf:len()
    if len < 6 or buf(0, 1):uint() ~= 1 or not VTYPES[buf(1, 1):uint()] or buf(2, 4):uint() ~= len - 6 then
        return false
    end
    venue.dissector(buf, pinfo, tree)
    return true
end

rmp:register_heuristic("udp", rmp_heuristic)
venue:register_heuristic("udp", venue_heuristic)
