/** How a bench ends: exit 0 once `main` resolves (its children stopped), or print the error and exit 1. */
export function runMain(main: () => Promise<void>): void {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
