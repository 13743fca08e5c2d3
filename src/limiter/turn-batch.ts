/**
 * Items of one event-loop turn, handed over together when the turn's I/O has run (setImmediate
 * runs after the poll phase, so requests read in the same poll share a batch).
 */
export class TurnBatch<T> {
  private items: T[] = []

  constructor(private readonly flush: (items: T[]) => void) {}

  add(item: T): void {
    if (this.items.push(item) === 1) setImmediate(this.run)
  }

  private readonly run = (): void => {
    const items = this.items
    this.items = []
    this.flush(items)
  }
}
