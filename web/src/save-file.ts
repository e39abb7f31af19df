/** Hands bytes fetched with the token to the browser as a file to save under `name`, never to open. */
export function saveBlob(blob: Blob, name: string): void {
  const url = URL.createObjectURL(new Blob([blob], { type: 'application/octet-stream' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.click();
  // The browser has the file once the click is handled; the URL may go a little later.
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
