'use strict'
// kafkasim driver for kafkajs (protocol: ../README.md): one JSON command per stdin line, one JSON
// reply per stdout line. Only replies go to stdout; console output and kafkajs logs go to stderr.
//
// kafkajs has no assign-mode consumer, so `consume` with group=null uses kafkajs's own Cluster and
// Broker.fetch plus its consumer's Batch class (internal modules of kafkajs, the same code its
// consumer runs: record-batch decoding, decompression, control-record filtering).
const readline = require('readline')
const { Kafka, CompressionTypes, CompressionCodecs, Partitioners, logLevel } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const Batch = require('kafkajs/src/consumer/batch')

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
const out = process.stdout.write.bind(process.stdout)
for (const m of ['log', 'info', 'warn', 'debug']) console[m] = (...a) => process.stderr.write(a.join(' ') + '\n')

const args = process.argv.slice(2)
const argOf = (name, dflt) => (args.indexOf(name) >= 0 ? args[args.indexOf(name) + 1] : dflt)
const BOOTSTRAP = argOf('--bootstrap', process.env.KAFKASIM_BOOTSTRAP || '127.0.0.1:9092')
const CLIENT_ID = argOf('--client-id', 'kafkasim-driver')
const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP, snappy: CompressionTypes.Snappy }
const CLIENT_ERRORS = []

const kafka = new Kafka({
  clientId: CLIENT_ID,
  brokers: BOOTSTRAP.split(','),  // a comma list, as every other driver takes
  logLevel: logLevel.ERROR,
  retry: { retries: 3 },
  logCreator: () => ({ level, log }) => {
    process.stderr.write(`[kafkajs ${level}] ${log.message} ${log.error || ''}\n`)
  },
})

const valueOf = (prefix, i) => `${prefix}-${i}`
const keyOf = (keyPrefix, i) => (keyPrefix == null ? null : `${keyPrefix}-${i}`)
const describe = e => `${(e && e.name) || 'Error'}: ${(e && e.message) || e}`
const noteError = (errors, e) => {
  const msg = typeof e === 'string' ? e : describe(e)
  if (!errors.includes(msg) && errors.length < 20) errors.push(msg)
}
const sleep = ms => new Promise(r => setTimeout(r, ms))
const acksOf = a => (a === 'all' || a === -1 || a === '-1' ? -1 : Number(a))

// ------------------------------------------------------------------ produce
const producers = new Map()
let admin = null

async function producerFor(cmd) {
  const key = JSON.stringify([cmd.idempotent == null ? null : !!cmd.idempotent])
  if (!producers.has(key)) {
    const opts = { createPartitioner: Partitioners.DefaultPartitioner }
    if (cmd.idempotent != null) opts.idempotent = !!cmd.idempotent
    if (opts.idempotent) opts.maxInFlightRequests = 1
    const p = kafka.producer(opts)
    await p.connect()
    producers.set(key, p)
  }
  return producers.get(key)
}

async function partitionsOf(topic) {
  if (!admin) {
    admin = kafka.admin()
    await admin.connect()
  }
  const md = await admin.fetchTopicMetadata({ topics: [topic] })
  return md.topics[0].partitions
}

async function produce(cmd) {
  const n = Number(cmd.count)
  const p = await producerFor(cmd)
  const messages = []
  for (let i = 0; i < n; i++) {
    const m = { value: valueOf(cmd.prefix, i) }
    const k = keyOf(cmd.key_prefix, i)
    if (k != null) m.key = k
    if (cmd.partition != null) m.partition = Number(cmd.partition)
    messages.push(m)
  }
  if (cmd.partition == null) {
    // kafkajs reports one base offset per partition; to know which message got which offset the
    // driver applies kafkajs's own default partitioner up front (same choice it would make).
    const partitionMetadata = await partitionsOf(cmd.topic)
    const partitioner = Partitioners.DefaultPartitioner()
    for (const m of messages) m.partition = partitioner({ topic: cmd.topic, partitionMetadata, message: m })
  }
  const acked = []
  const errors = []
  const send = { topic: cmd.topic, compression: CODECS[cmd.compression || 'none'], timeout: cmd.timeout_ms || 30000 }
  if (cmd.compression && !(cmd.compression in CODECS)) throw new Error(`codec ${cmd.compression} not supported`)
  if (cmd.acks != null) send.acks = acksOf(cmd.acks)
  const CHUNK = 1000
  for (let start = 0; start < n; start += CHUNK) {
    const chunk = messages.slice(start, start + CHUNK)
    try {
      const meta = await p.send({ ...send, messages: chunk })
      const base = new Map(meta.map(r => [r.partition, r.errorCode === 0 ? Number(r.baseOffset) : null]))
      const seen = new Map()
      for (const m of chunk) {
        const b = base.has(m.partition) ? base.get(m.partition) : -1
        const idx = seen.get(m.partition) || 0
        seen.set(m.partition, idx + 1)
        if (b === null) continue
        acked.push([m.partition, b < 0 ? -1 : b + idx, m.value])
      }
    } catch (e) {
      noteError(errors, e)
    }
  }
  return { op: 'produced', acked, errors }
}

// ------------------------------------------------------------------ consume, assign mode
let assignCluster = null
const assigned = new Map() // topic -> { partitions: [...], next: Map(partition -> offset) }

async function clusterForAssign() {
  if (!assignCluster) {
    const sym = Object.getOwnPropertySymbols(kafka).find(s => s.description === 'private:Kafka:createCluster')
    assignCluster = kafka[sym]({ allowAutoTopicCreation: false, isolationLevel: 1 })
    await assignCluster.connect()
  }
  return assignCluster
}

async function consumeAssigned(cmd) {
  const cluster = await clusterForAssign()
  const topic = cmd.topic
  const deadline = Date.now() + (cmd.timeout_ms || 10000)
  if (!assigned.has(topic)) {
    let parts = []
    while (parts.length === 0 && Date.now() < deadline) {
      await cluster.addTargetTopic(topic)
      await cluster.refreshMetadata()
      try {
        parts = cluster.findTopicPartitionMetadata(topic).map(pm => pm.partitionId)
      } catch (e) {
        parts = []
      }
      if (parts.length === 0) await sleep(100)
    }
    if (parts.length === 0) throw new Error(`topic ${topic} has no partitions in metadata`)
    parts.sort((a, b) => a - b)
    const offsets = await cluster.fetchTopicsOffset([
      { topic, fromBeginning: (cmd.from || 'earliest') === 'earliest', partitions: parts.map(partition => ({ partition })) },
    ])
    const next = new Map(offsets[0].partitions.map(({ partition, offset }) => [partition, offset]))
    assigned.set(topic, { partitions: parts, next })
  }
  const st = assigned.get(topic)
  const max = cmd.max == null ? Infinity : Number(cmd.max)
  const records = []
  while (records.length < max && Date.now() < deadline) {
    const byLeader = cluster.findLeaderForPartitions(topic, st.partitions)
    let got = 0
    for (const nodeId of Object.keys(byLeader)) {
      const broker = await cluster.findBroker({ nodeId })
      const resp = await broker.fetch({
        isolationLevel: 1,
        maxWaitTime: Math.max(1, Math.min(200, deadline - Date.now())),
        minBytes: 1,
        topics: [{ topic, partitions: byLeader[nodeId].map(partition => ({ partition, fetchOffset: String(st.next.get(partition)), maxBytes: 1048576 })) }],
      })
      for (const tr of resp.responses) {
        for (const pd of tr.partitions) {
          if (pd.errorCode !== 0) throw new Error(`fetch ${topic}/${pd.partition}: error code ${pd.errorCode}`)
          const batch = new Batch(topic, st.next.get(pd.partition), pd)
          for (const m of batch.messages) {
            if (records.length >= max) break
            records.push([pd.partition, Number(m.offset), m.value == null ? null : m.value.toString()])
            st.next.set(pd.partition, String(Number(m.offset) + 1))
            got++
          }
        }
      }
    }
    if (got === 0 && records.length > 0) break
  }
  return { op: 'consumed', records, assignment: st.partitions, errors: [] }
}

// ------------------------------------------------------------------ consume, group mode
const members = new Map() // key -> member

async function startMember(cmd) {
  const m = { topic: cmd.topic, group: cmd.group, want: 0, buf: [], returned: new Map(), assignment: [], errors: [] }
  m.consumer = kafka.consumer({
    groupId: cmd.group,
    sessionTimeout: cmd.session_timeout_ms || 10000,
    heartbeatInterval: cmd.heartbeat_interval_ms || 1000,
    allowAutoTopicCreation: false,
  })
  const ev = m.consumer.events
  m.consumer.on(ev.GROUP_JOIN, e => { m.assignment = (e.payload.memberAssignment[m.topic] || []).slice().sort((a, b) => a - b) })
  m.consumer.on(ev.CRASH, e => { m.crashed = e.payload.error })
  await m.consumer.connect()
  await m.consumer.subscribe({ topic: m.topic, fromBeginning: (cmd.from || 'earliest') === 'earliest' })
  await m.consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset, isRunning, isStale }) => {
      for (const msg of batch.messages) {
        if (m.want <= 0 || !isRunning() || isStale()) break
        m.buf.push([batch.partition, Number(msg.offset), msg.value == null ? null : msg.value.toString()])
        m.returned.set(batch.partition, Number(msg.offset) + 1)
        m.want--
        resolveOffset(msg.offset)
      }
      // messages not taken stay unresolved: kafkajs fetches them again after the next resume()
      if (m.want <= 0) m.consumer.pause([{ topic: m.topic }])
    },
  })
  return m
}

async function consumeGroup(cmd) {
  const key = JSON.stringify([cmd.topic, cmd.group])
  if (!members.has(key)) members.set(key, await startMember(cmd))
  const m = members.get(key)
  const max = cmd.max == null ? 1 << 30 : Number(cmd.max)
  const deadline = Date.now() + (cmd.timeout_ms || 10000)
  m.want = max
  m.buf = []
  if (!m.crashed) m.consumer.resume([{ topic: m.topic }])
  while (m.want > 0 && Date.now() < deadline && !m.crashed) await sleep(20)
  m.want = 0
  if (m.crashed) {
    members.delete(key)
    try { await m.consumer.disconnect() } catch (e) { /* already down */ }
    throw new Error(`consumer crashed: ${describe(m.crashed)}`)
  }
  m.consumer.pause([{ topic: m.topic }])
  const records = m.buf
  m.buf = []
  const reply = { op: 'consumed', records, assignment: m.assignment, errors: m.errors.splice(0) }
  if (cmd.commit) reply.committed = await commitMember(m)
  return reply
}

async function commitMember(m) {
  const owned = new Set(m.assignment)
  const offsets = [...m.returned.entries()].filter(([p]) => owned.has(p)).sort((a, b) => a[0] - b[0])
  if (offsets.length) await m.consumer.commitOffsets(offsets.map(([partition, o]) => ({ topic: m.topic, partition, offset: String(o) })))
  return offsets
}

// ------------------------------------------------------------------ loop
async function close() {
  for (const m of members.values()) await m.consumer.disconnect()
  for (const p of producers.values()) await p.disconnect()
  if (admin) await admin.disconnect()
  if (assignCluster) await assignCluster.disconnect()
}

const handlers = {
  hello: async () => ({
    op: 'hello', client: 'kafkajs', version: require('kafkajs/package.json').version, language: 'javascript',
    codecs: Object.keys(CODECS), default_idempotent: false,
  }),
  produce,
  consume: cmd => (cmd.group == null ? consumeAssigned(cmd) : consumeGroup(cmd)),
  commit: async () => {
    let offsets = []
    for (const m of members.values()) offsets = offsets.concat(await commitMember(m))
    return { op: 'committed', offsets }
  },
}

function reply(obj, cmd) {
  if (cmd && cmd.id !== undefined) obj.id = cmd.id
  out(JSON.stringify(obj) + '\n')
}

async function main() {
  const rl = readline.createInterface({ input: process.stdin, terminal: false })
  for await (const raw of rl) {
    const line = raw.trim()
    if (!line) continue
    let cmd
    try {
      cmd = JSON.parse(line)
      if (typeof cmd !== 'object' || cmd === null || Array.isArray(cmd)) throw new Error('a command is a JSON object')
    } catch (e) {
      reply({ op: 'error', error: `bad command line: ${describe(e)}`, cmd: null })
      continue
    }
    if (cmd.op === 'close') {
      try {
        await close()
        reply({ op: 'closed' }, cmd)
      } catch (e) {
        reply({ op: 'error', error: describe(e), cmd: 'close' }, cmd)
      }
      process.exit(0)
    }
    const h = handlers[cmd.op]
    if (!h) {
      reply({ op: 'error', error: `unknown op ${JSON.stringify(cmd.op)}`, cmd: cmd.op }, cmd)
      continue
    }
    try {
      reply(await h(cmd), cmd)
    } catch (e) {
      process.stderr.write(`${e && e.stack}\n`)
      reply({ op: 'error', error: describe(e), cmd: cmd.op }, cmd)
    }
  }
  try { await close() } catch (e) { process.stderr.write(`${e && e.stack}\n`) }
  process.exit(0)
}

process.on('unhandledRejection', e => noteError(CLIENT_ERRORS, e))
main()
