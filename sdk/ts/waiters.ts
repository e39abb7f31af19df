/** Promises that resolve when a condition holds, checked at each notify(), or false at a timeout. */
export class Waiters {
  private readonly checks = new Set<() => void>();

  /** Resolves true once `cond()` holds at a notify(), or false after `ms`. */
  until(cond: () => boolean, ms: number): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const t = setTimeout(() => {
        this.checks.delete(check);
        resolve(false);
      }, ms);
      const check = () => {
        if (!cond()) return;
        clearTimeout(t);
        this.checks.delete(check);
        resolve(true);
      };
      this.checks.add(check);
    });
  }

  notify(): void {
    for (const c of [...this.checks]) c();
  }
}
