/**
 * The banner's console line. The link that signs in as admin carries the token, so it is printed
 * only to a terminal; elsewhere the line says where the token is kept (`tokenFile`, or the
 * GPUPLANE_ADMIN_TOKEN variable when null) and links without it.
 */
export function consoleLine(apiUrl: string, token: string | null, tokenFile: string | null, onTerminal: boolean): string {
  const kept = tokenFile ? `in ${tokenFile}` : 'in GPUPLANE_ADMIN_TOKEN';
  if (!token) return `${apiUrl}/   (sign in with an admin token)`;
  if (onTerminal) return `${apiUrl}/?token=${token}   (signs you in as admin; the token is also ${kept})`;
  return `${apiUrl}/   (sign in with the admin token kept ${kept}; stdout is not a terminal, so it is not printed)`;
}
