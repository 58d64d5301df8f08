// Bare baseline for the actor-call benchmark: a child process that answers every IPC message.
process.on('message', (m) => process.send([12, m[1], m[1]]))
process.on('disconnect', () => process.exit(0))
