// A host's own AG-UI frontend as CopilotKit's docs build it, with no CopilotKit runtime: the provider is handed
// an @ag-ui/client HttpAgent pointed at the site's AG-UI endpoint (a self-managed agent), CopilotChat is the
// conversation, and useInterrupt shows the endpoint's approval as a card whose buttons answer it.
import { HttpAgent } from "@ag-ui/client";
import { CopilotKit } from "@copilotkit/react-core";
import { useInterrupt } from "@copilotkit/react-core/v2";
import { CopilotChat } from "@copilotkit/react-ui";
import "@copilotkit/react-ui/styles.css";
import { createRoot } from "react-dom/client";

function ApprovalCard() {
  useInterrupt({
    render: ({ interrupt, resolve }) => (
      <div className="approval-card" role="group" aria-label="Approval">
        <p className="approval-question">{interrupt?.message}</p>
        <button type="button" onClick={() => resolve({ approve: true })}>Approve</button>{" "}
        <button type="button" onClick={() => resolve({ approve: false })}>Deny</button>
      </div>
    ),
  });
  return null;
}

// mount(element, {url, headers, threadId}): the chat in `element`, talking to `url` with `headers`.
function mount(element, { url, headers, threadId }) {
  const agent = new HttpAgent({ url, headers, threadId });
  createRoot(element).render(
    <CopilotKit selfManagedAgents={{ default: agent }} threadId={threadId} showDevConsole={false}>
      <ApprovalCard />
      <CopilotChat labels={{ title: "My app's copilot", initial: "Ask me about your projects." }} />
    </CopilotKit>,
  );
  return agent;
}

window.CopilotKitPage = { mount };
