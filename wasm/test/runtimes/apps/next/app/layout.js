// The App Router needs a root layout; the test app has no pages.
export default function RootLayout({ children }) {
  return children;
}
