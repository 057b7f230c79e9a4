// Reads a deskenv export with DuckDB, an independent Parquet reader, and
// prints what it found as one JSON object: the columns and their types, the
// row count, the Hugging Face metadata key, and every row's image bytes
// (base64) so the Go test can decode them. DuckDB's engine ships inside the
// npm package; no extension is downloaded.
//
//   node check.mjs FILE.parquet
import { DuckDBInstance } from '@duckdb/node-api';

const file = process.argv[2];
if (!file) {
  process.stderr.write('usage: node check.mjs FILE.parquet\n');
  process.exit(2);
}
const q = (s) => `'${s.replaceAll("'", "''")}'`;
const db = await DuckDBInstance.create(':memory:', { autoinstall_known_extensions: 'false' });
const c = await db.connect();
const rows = async (sql) => (await c.runAndReadAll(sql)).getRowObjectsJson();

const columns = (await rows(`DESCRIBE SELECT * FROM read_parquet(${q(file)})`)).map((r) => [r.column_name, r.column_type]);
const [{ n }] = await rows(`SELECT count(*)::INTEGER AS n FROM read_parquet(${q(file)})`);
const kv = (await rows(`SELECT decode(key) AS k FROM parquet_kv_metadata(${q(file)})`)).map((r) => r.k);
const images = await rows(`SELECT episode_id, step, action, coordinate, image.path AS path,
    base64(image.bytes) AS png, model_w, model_h, reward, done
  FROM read_parquet(${q(file)}) ORDER BY episode_id, step`);
process.stdout.write(JSON.stringify({ columns, rows: n, kv, images }) + '\n');
