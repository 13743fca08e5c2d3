import { randomBytes } from 'node:crypto'
import { open, unlink, type FileHandle } from 'node:fs/promises'
import { join } from 'node:path'

/**
 * A temporary file for held bytes (a body, an answer), unlinked at once: only its handle names
 * it, so the disk is given back when it is closed or the process dies, and no other user of
 * the folder can open it (created 0600, exclusively). A file that cannot be unlinked is closed.
 */
export async function openUnlinkedTemp(dir: string, what: string): Promise<FileHandle> {
  const path = join(dir, `basegate-${what}-${process.pid}-${randomBytes(8).toString('hex')}`)
  const fh = await open(path, 'wx+', 0o600)
  try {
    await unlink(path)
  } catch (err) {
    await fh.close().catch(() => {})
    throw err
  }
  return fh
}
