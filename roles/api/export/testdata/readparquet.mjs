// Reads a Parquet file with hyparquet, an independent reader, and prints
// its schema as one JSON line, then one tab-separated line per row:
// times as integer microseconds (not converted to Dates, which keep
// milliseconds), absent values as \N. Rows are read a row group's worth at
// a time, so a large file does not need its rows in memory at once.
//
//   node readparquet.mjs <node_modules> <file.parquet>
import path from 'node:path'

const [modules, file] = process.argv.slice(2)
const hp = await import(path.join(modules, 'hyparquet', 'src', 'node.js'))
const buf = await hp.asyncBufferFromFile(file)
const metadata = await hp.parquetMetadataAsync(buf)
const schema = hp.parquetSchema(metadata).children.map(c => ({
  name: c.element.name,
  type: c.element.type,
  logical: c.element.logical_type ? JSON.stringify(c.element.logical_type, (k, v) => typeof v === 'bigint' ? Number(v) : v) : '',
  repetition: c.element.repetition_type,
}))
await write(JSON.stringify({ rows: Number(metadata.num_rows), rowGroups: metadata.row_groups.length, schema }) + '\n')
const total = Number(metadata.num_rows)
const chunk = 65536
for (let start = 0; start < total; start += chunk) {
  let rows
  await hp.parquetRead({
    file: buf, metadata, rowStart: start, rowEnd: Math.min(start + chunk, total),
    parsers: { timestampFromMicroseconds: v => v },
    onComplete: r => { rows = r },
  })
  const lines = rows.map(r => r.map(v => v === null || v === undefined ? '\\N' : String(v)).join('\t'))
  await write(lines.join('\n') + '\n')
}

function write(s) {
  return new Promise((resolve, reject) => process.stdout.write(s, err => err ? reject(err) : resolve()))
}
