// pg-boss as a peer: jobs with startAfter, one work() loop.
//
//   NODE_PATH=bench/.peers/node_modules node bench/peer_drivers/pgboss_driver.cjs '<json config>'
//
// The handler records [due, time it ran] for every job; lateness = ran - due. Worker settings:
// batchSize BATCH, pollingIntervalSeconds POLL_S (0.5 s, pg-boss's minimum: the fairest it
// allows; its default is 2 s). Prints one JSON line like the other drivers.
'use strict'
const PgBoss = require('pg-boss')

const BATCH = 1000
const POLL_S = 0.5
const INSERT_BATCH = 1000

async function main (cfg) {
  const boss = new PgBoss({ host: cfg.host, port: cfg.port, user: cfg.user,
    database: cfg.database, max: 10 })
  const errors = []
  boss.on('error', e => errors.push(String(e && e.message)))
  await boss.start()
  const name = 'bench'
  await boss.createQueue(name).catch(() => {})
  const pairs = []
  const n = cfg.n
  let resolveDone
  const done = new Promise(resolve => { resolveDone = resolve })
  await boss.work(name, { batchSize: BATCH, pollingIntervalSeconds: POLL_S }, async jobs => {
    const now = Date.now() / 1000
    for (const j of jobs) pairs.push([j.data.due, now])
    if (pairs.length >= n) resolveDone()
  })
  const insert = async (count, due) => {
    const startAfter = new Date(due * 1000).toISOString()
    const jobs = []
    for (let i = 0; i < count; i++) jobs.push({ name, data: { due }, startAfter })
    await boss.insert(jobs)
  }
  if (cfg.workload === 'burst') {
    for (let i = 0; i < n; i += INSERT_BATCH) await insert(Math.min(INSERT_BATCH, n - i), cfg.due)
  } else {
    const t0 = Date.now()
    let sent = 0
    while (sent < n) {
      const want = Math.min(Math.floor(cfg.rate * (Date.now() - t0) / 1000) + 1, n) - sent
      if (want <= 0) { await new Promise(r => setTimeout(r, 5)); continue }
      await insert(want, Date.now() / 1000 + cfg.delay)
      sent += want
    }
  }
  const timeout = new Promise(resolve => setTimeout(() => { errors.push('timeout'); resolve() },
    cfg.timeout * 1000))
  await Promise.race([done, timeout])
  await boss.stop({ graceful: false, wait: false }).catch(() => {})
  return { scheduled: n, delivered: pairs.length, pairs, errors,
    settings: { batchSize: BATCH, pollingIntervalSeconds: POLL_S } }
}

// stdout to a pipe is asynchronous in Node: exit only once the line is flushed, or a large
// result is cut at 64 KiB
main(JSON.parse(process.argv[2])).then(r => {
  process.stdout.write(JSON.stringify(r) + '\n', () => process.exit(0))
}, e => {
  process.stdout.write(JSON.stringify({ scheduled: 0, delivered: 0, pairs: [],
    errors: [String(e && e.stack)] }) + '\n', () => process.exit(1))
})
